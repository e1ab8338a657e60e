# examples/dlrm/local.mk: rules of examples/dlrm (included by Makefile.am)
