# examples/dlrm/local.mk: rules of examples/dlrm (included by Makefile.am)
#
# A DLRM-style click model: the embedding tables in libshemb, the dense
# layers in C on a matrix product from oneDNN when configure found it
# (matmul_dnnl.c), else from plain loops (matmul_ref.c).

DLRM_NET_SOURCES = examples/dlrm/dlrm.h examples/dlrm/matmul.h \
	examples/dlrm/mlp.c examples/dlrm/interact.c examples/dlrm/net.c \
	examples/dlrm/auc.c

noinst_PROGRAMS += examples/dlrm/dlrm
examples_dlrm_dlrm_SOURCES = examples/dlrm/dlrm.c examples/dlrm/train.h \
	examples/dlrm/train.c examples/dlrm/data.c $(DLRM_NET_SOURCES)
examples_dlrm_dlrm_CPPFLAGS = $(AM_CPPFLAGS) $(DNNL_CFLAGS)
examples_dlrm_dlrm_LDADD = libshemb.la $(DNNL_LIBS) -lm

# The check program tests every product the build has against its own
# loops, so it always has the plain one, and oneDNN's when found; it
# needs nothing of libshemb.
check_PROGRAMS += examples/dlrm/dlrm_check
examples_dlrm_dlrm_check_SOURCES = examples/dlrm/dlrm_check.c \
	examples/dlrm/matmul_ref.c $(DLRM_NET_SOURCES)
examples_dlrm_dlrm_check_CPPFLAGS = $(AM_CPPFLAGS) $(DNNL_CFLAGS)
examples_dlrm_dlrm_check_LDADD = $(DNNL_LIBS) -lm

if HAVE_DNNL
examples_dlrm_dlrm_SOURCES += examples/dlrm/matmul_dnnl.c
examples_dlrm_dlrm_check_SOURCES += examples/dlrm/matmul_dnnl.c
else
examples_dlrm_dlrm_SOURCES += examples/dlrm/matmul_ref.c
endif

# Training on a small log, one rank and two; the products and the
# gradients.
TESTS += examples/dlrm/dlrm_check tests/dlrm.sh
EXTRA_DIST += tests/dlrm.sh
