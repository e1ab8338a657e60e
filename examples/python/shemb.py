#!/usr/bin/env python3
"""shemb.py - libshemb from Python through ctypes: a small binding of the
C ABI and a training loop, to show that any language with a C FFI can
own its embedding tables with libshemb.

    python3 shemb.py            train a toy model, print the loss
    python3 shemb.py --check    the same, checked (exit 1 on a failure)

The library is found through SHEMB_LIB (a path to libshemb.so), else by
the dynamic loader's search (ldconfig, LD_LIBRARY_PATH).  A libshemb
built with jemalloc has initial-exec TLS: a Python process that did not
start with it needs GLIBC_TUNABLES=glibc.rtld.optional_static_tls=65536
in its environment (see the README).

Arrays go to the library through the buffer protocol: array.array('q')
and array.array('f') here, NumPy int64 and float32 arrays just as well
(C-contiguous); the training loop uses NumPy for its arithmetic when it
is installed, plain Python otherwise.
"""
import array
import ctypes
import os
import sys

try:
    import numpy
except ImportError:
    numpy = None

# enum values of shemb.h
F32 = 0
POOL_SUM, POOL_MEAN, POOL_MAX, POOL_NONE = 0, 1, 2, 3
OPT_SGD, OPT_ADAGRAD = 0, 1


class TableAttr(ctypes.Structure):
    """struct shemb_table_attr, in the order of shemb.h."""
    _fields_ = [
        ("size", ctypes.c_size_t), ("name", ctypes.c_char_p),
        ("rows", ctypes.c_int64), ("dim", ctypes.c_int),
        ("dtype", ctypes.c_int), ("table_id", ctypes.c_int64),
        ("seed", ctypes.c_uint64), ("init", ctypes.c_int),
        ("init_low", ctypes.c_float), ("init_high", ctypes.c_float),
        ("init_mean", ctypes.c_float), ("init_std", ctypes.c_float),
        ("init_value", ctypes.c_float), ("optimizer", ctypes.c_int),
        ("lr", ctypes.c_float), ("eps", ctypes.c_float),
        ("beta1", ctypes.c_float), ("beta2", ctypes.c_float),
        ("weight_decay", ctypes.c_float),
        ("weight_decay_mode", ctypes.c_int),
        ("initial_accumulator", ctypes.c_float), ("shard", ctypes.c_int),
        ("shard_owner", ctypes.c_int), ("expected_skew", ctypes.c_float),
        ("wire_dtype", ctypes.c_int), ("pool_at", ctypes.c_int),
        ("cache_rows", ctypes.c_int64), ("cache_policy", ctypes.c_int),
        ("cold_path", ctypes.c_char_p), ("host_mem_bytes", ctypes.c_uint64),
        ("read_only", ctypes.c_int),
    ]


class Bags(ctypes.Structure):
    """struct shemb_bags."""
    _fields_ = [
        ("size", ctypes.c_size_t), ("table", ctypes.c_void_p),
        ("pooling", ctypes.c_int), ("dim", ctypes.c_int),
        ("nbags", ctypes.c_int64), ("offsets", ctypes.c_void_p),
        ("nids", ctypes.c_int64), ("ids", ctypes.c_void_p),
        ("weights", ctypes.c_void_p), ("mem", ctypes.c_int),
    ]


class Error(Exception):
    """A call of the library failed: its code (and its name) and
    detail."""

    def __init__(self, call, code, name, detail):
        super().__init__("%s: %s (%d): %s" % (call, name, code, detail))
        self.code = code


def _load(path=None):
    lib = ctypes.CDLL(path or os.environ.get("SHEMB_LIB", "libshemb.so.0"))
    p = ctypes.c_void_p
    lib.shemb_version_string.restype = ctypes.c_char_p
    lib.shemb_strerror.restype = ctypes.c_char_p
    lib.shemb_strerror.argtypes = [ctypes.c_int]
    lib.shemb_ctx_last_error.restype = ctypes.c_char_p
    lib.shemb_ctx_last_error.argtypes = [p]
    lib.shemb_ctx_attr_init_size.argtypes = [p, ctypes.c_size_t]
    lib.shemb_ctx_create.argtypes = [p, ctypes.POINTER(p)]
    lib.shemb_ctx_destroy.argtypes = [p]
    lib.shemb_table_attr_init_size.argtypes = [p, ctypes.c_size_t]
    lib.shemb_table_create.argtypes = [p, p, ctypes.POINTER(p)]
    lib.shemb_table_destroy.argtypes = [p]
    lib.shemb_bags_init_size.argtypes = [p, ctypes.c_size_t]
    lib.shemb_lookup.argtypes = [p, ctypes.c_int, p, p, ctypes.c_uint]
    lib.shemb_backward.argtypes = [p, ctypes.c_int, p, p]
    lib.shemb_table_read_rows.argtypes = [p, ctypes.c_int64, p, p,
                                          ctypes.c_int]
    return lib


def _carray(buf, typecode, writable):
    """A ctypes array over a C-contiguous buffer (of any shape) of
    typecode 'q' (int64) or 'f' (float32): array.array, a NumPy array, a
    memoryview.  A buffer the library only reads may be read-only: it is
    then copied.  The array must outlive the call that uses it."""
    view = memoryview(buf)
    formats = {"q": ("q", "<q", "=q", "l", "<l", "=l"),
               "f": ("f", "<f", "=f")}[typecode]
    size = 8 if typecode == "q" else 4
    if view.format not in formats or view.itemsize != size or \
            not view.c_contiguous:
        raise TypeError("want a C-contiguous buffer of %s, not %s" %
                        ("int64" if typecode == "q" else "float32",
                         view.format))
    ctype = ctypes.c_int64 if typecode == "q" else ctypes.c_float
    n = view.nbytes // size
    if not view.readonly:
        return (ctype * n).from_buffer(view)
    if writable:
        raise TypeError("the library writes this buffer: it must be "
                        "writable")
    return (ctype * n).from_buffer_copy(view)


def _room(arr, floats, what):
    """The library writes floats values into arr (or reads them): a
    shorter buffer is refused here, as C cannot tell."""
    if len(arr) < floats:
        raise ValueError("%s holds %d floats, the call needs %d" %
                         (what, len(arr), floats))


class Context:
    """A shemb_ctx of one rank on the CPU, with the library's defaults
    (world size and rank from the environment when a launcher set
    them)."""

    def __init__(self, lib_path=None):
        self.lib = _load(lib_path)
        attr = ctypes.create_string_buffer(4096)  # larger than the struct
        self.lib.shemb_ctx_attr_init_size(attr, len(attr))
        self.ptr = ctypes.c_void_p()
        self.tables = []  # destroyed with the context
        self._check("shemb_ctx_create",
                    self.lib.shemb_ctx_create(attr, ctypes.byref(self.ptr)))

    def _check(self, call, rc):
        if rc != 0:
            raise Error(call, rc, self.lib.shemb_strerror(rc).decode(),
                        (self.lib.shemb_ctx_last_error(
                            getattr(self, "ptr", None)) or b"").decode())

    def table(self, rows, dim, optimizer=OPT_SGD, lr=0.01, name="table"):
        a = TableAttr()
        self.lib.shemb_table_attr_init_size(ctypes.byref(a), ctypes.sizeof(a))
        a.name = name.encode()
        a.rows, a.dim, a.dtype = rows, dim, F32
        a.optimizer, a.lr = optimizer, lr
        t = ctypes.c_void_p()
        if not self.ptr:
            raise ValueError("the context is closed")
        self._check("shemb_table_create", self.lib.shemb_table_create(
            self.ptr, ctypes.byref(a), ctypes.byref(t)))
        table = Table(self, t, rows, dim)
        self.tables.append(table)
        return table

    def close(self):
        """Destroys the context and, with it, its tables (their objects
        then refuse every call)."""
        for t in self.tables:
            t.ptr = None
        self.tables = []
        if self.ptr:
            self.lib.shemb_ctx_destroy(self.ptr)
            self.ptr = None


class Table:
    """A table of the context; bags are CSR: offsets[nbags + 1] and ids
    (int64 buffers), out and grad float32 buffers of nbags * dim."""

    def __init__(self, ctx, ptr, rows, dim):
        self.ctx, self.ptr, self.rows, self.dim = ctx, ptr, rows, dim

    def _live(self):
        if not self.ptr or not self.ctx.ptr:
            raise ValueError("the table or its context is closed")

    def _bags(self, offsets, ids, pooling):
        """The bags, and the arrays they point into (kept by the caller
        for the call)."""
        self._live()
        b = Bags()
        self.ctx.lib.shemb_bags_init_size(ctypes.byref(b), ctypes.sizeof(b))
        offs = _carray(offsets, "q", False)
        idss = _carray(ids, "q", False)
        b.table = self.ptr
        b.pooling = pooling
        b.nbags = len(offs) - 1
        b.offsets = ctypes.addressof(offs)
        b.nids = len(idss)
        b.ids = ctypes.addressof(idss) if len(idss) else None
        return b, (offs, idss)

    def _rows_of(self, b, pooling):
        return (b.nids if pooling == POOL_NONE else b.nbags) * self.dim

    def lookup(self, offsets, ids, out, pooling=POOL_SUM, keep_plan=True):
        b, keep = self._bags(offsets, ids, pooling)
        o = _carray(out, "f", True)
        _room(o, self._rows_of(b, pooling), "out")
        outp = ctypes.c_void_p(ctypes.addressof(o))
        self.ctx._check("shemb_lookup", self.ctx.lib.shemb_lookup(
            self.ctx.ptr, 1, ctypes.byref(b), ctypes.byref(outp),
            0 if keep_plan else 1))

    def backward(self, offsets, ids, grad, pooling=POOL_SUM):
        b, keep = self._bags(offsets, ids, pooling)
        g = _carray(grad, "f", False)
        _room(g, self._rows_of(b, pooling), "grad")
        gp = ctypes.c_void_p(ctypes.addressof(g))
        self.ctx._check("shemb_backward", self.ctx.lib.shemb_backward(
            self.ctx.ptr, 1, ctypes.byref(b), ctypes.byref(gp)))

    def read_rows(self, ids, out):
        self._live()
        i = _carray(ids, "q", False)
        o = _carray(out, "f", True)
        _room(o, len(i) * self.dim, "out")
        self.ctx._check("shemb_table_read_rows",
                        self.ctx.lib.shemb_table_read_rows(
                            self.ptr, len(i), ctypes.addressof(i),
                            ctypes.addressof(o), F32))

    def close(self):
        """Destroys the table; after its context is closed, nothing is
        left to do."""
        if self.ptr and self.ctx.ptr:
            self.ctx.lib.shemb_table_destroy(self.ptr)
            self.ctx.tables.remove(self)
        self.ptr = None


# ---- a toy model: learn rows whose bag sums hit targets ----

ROWS, DIM, BAGS, LEN = 200, 8, 64, 4


def _rng(seed):
    """A small deterministic generator (so the check needs no NumPy)."""
    state = [seed & 0xFFFFFFFFFFFFFFFF]

    def next_u64():
        state[0] = (state[0] + 0x9E3779B97F4A7C15) & 0xFFFFFFFFFFFFFFFF
        z = state[0]
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & 0xFFFFFFFFFFFFFFFF
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & 0xFFFFFFFFFFFFFFFF
        return z ^ (z >> 31)
    return next_u64


def make_batch(rng, truth):
    """Bags of LEN ids, and their targets: the sums of the true rows."""
    offsets = array.array("q", range(0, BAGS * LEN + 1, LEN))
    ids = array.array("q", (rng() % ROWS for _ in range(BAGS * LEN)))
    target = array.array("f", bytes(4 * BAGS * DIM))
    for k in range(BAGS):
        for i in ids[k * LEN:(k + 1) * LEN]:
            for c in range(DIM):
                target[k * DIM + c] += truth[i * DIM + c]
    return offsets, ids, target


def loss_and_grad(out, target):
    """Mean squared error over the batch, and its gradient."""
    if numpy is not None:
        o = numpy.frombuffer(out, dtype=numpy.float32)
        d = o - numpy.frombuffer(target, dtype=numpy.float32)
        grad = array.array("f", (2.0 * d / len(o)).astype(numpy.float32)
                           .tobytes())
        return float((d * d).mean()), grad
    d = [o - t for o, t in zip(out, target)]
    grad = array.array("f", (2.0 * x / len(d) for x in d))
    return sum(x * x for x in d) / len(d), grad


def pooled_by_hand(table, offsets, ids):
    """The SUM pooling of the bags, from the rows read back: the check's
    reference, apart from the library's lookup."""
    rows = array.array("f", bytes(4 * ROWS * DIM))
    table.read_rows(array.array("q", range(ROWS)), rows)
    out = [0.0] * ((len(offsets) - 1) * DIM)
    for k in range(len(offsets) - 1):
        for i in ids[offsets[k]:offsets[k + 1]]:
            for c in range(DIM):
                out[k * DIM + c] += rows[i * DIM + c]
    return out


def check_buffers(table, rng, truth):
    """Read-only ids and offsets, and an output of shape (bags, dim),
    give the lookup of plain arrays."""
    offsets, ids, _ = make_batch(rng, truth)
    want = array.array("f", bytes(4 * BAGS * DIM))
    table.lookup(offsets, ids, want, keep_plan=False)
    got = array.array("f", bytes(4 * BAGS * DIM))
    table.lookup(memoryview(offsets.tobytes()).cast("q"),
                 memoryview(ids.tobytes()).cast("q"),
                 memoryview(got).cast("B").cast("f", [BAGS, DIM]),
                 keep_plan=False)
    if got != want:
        raise SystemExit("read-only inputs or a 2-D output differ")


def check_closed():
    """A table whose context is closed refuses calls, and closes."""
    ctx = Context()
    table = ctx.table(10, DIM)
    ctx.close()
    try:
        table.read_rows(array.array("q", [0]), array.array("f", [0] * DIM))
        raise SystemExit("a table read after its context closed")
    except ValueError:
        pass
    table.close()


def train(steps=60, check=False):
    ctx = Context()
    print("libshemb %s, NumPy %s" % (
        ctx.lib.shemb_version_string().decode(),
        numpy.__version__ if numpy is not None else "absent"))
    table = ctx.table(ROWS, DIM, optimizer=OPT_ADAGRAD, lr=0.5,
                      name="python")
    rng = _rng(1)
    truth = array.array("f", ((rng() % 2001) / 1000.0 - 1.0
                              for _ in range(ROWS * DIM)))
    out = array.array("f", bytes(4 * BAGS * DIM))
    first = last = None
    for step in range(steps):
        offsets, ids, target = make_batch(rng, truth)
        table.lookup(offsets, ids, out)
        if check and step == 0:
            want = pooled_by_hand(table, offsets, ids)
            worst = max(abs(a - b) for a, b in zip(out, want))
            if worst > 1e-5:
                raise SystemExit("lookup differs from the rows by %g"
                                 % worst)
        loss, grad = loss_and_grad(out, target)
        table.backward(offsets, ids, grad)
        first = loss if first is None else first
        last = loss
        if step % 10 == 0 or step == steps - 1:
            print("step %3d  loss %.5f" % (step, loss))
    if check and numpy is not None:  # NumPy arrays as buffers too
        offsets, ids, _ = make_batch(rng, truth)
        npo = numpy.zeros(BAGS * DIM, dtype=numpy.float32)
        table.lookup(numpy.array(offsets, dtype=numpy.int64),
                     numpy.array(ids, dtype=numpy.int64), npo)
        want = numpy.array(pooled_by_hand(table, offsets, ids),
                           dtype=numpy.float32)
        if numpy.abs(npo - want).max() > 1e-5:
            raise SystemExit("a lookup of NumPy arrays differs")
    if check:
        bad = array.array("q", [ROWS])  # one past the last row
        try:
            table.lookup(array.array("q", [0, 1]), bad, out)
            raise SystemExit("a lookup of row %d did not fail" % ROWS)
        except Error as e:
            if e.code != -1 or "outside" not in str(e):  # SHEMB_EINVAL
                raise SystemExit("a bad id gave %s" % e)
        try:  # an output too short for the bags is refused, not written
            table.lookup(array.array("q", [0, 1, 2]),
                         array.array("q", [3, 4]), array.array("f", [0]))
            raise SystemExit("a lookup into 1 float of 2 bags ran")
        except ValueError:
            pass
        check_buffers(table, rng, truth)
    table.close()
    ctx.close()
    if check:
        check_closed()
    if check and not last < 0.2 * first:
        raise SystemExit("the loss went from %g to %g only" % (first, last))
    return first, last


if __name__ == "__main__":
    train(check="--check" in sys.argv[1:])
