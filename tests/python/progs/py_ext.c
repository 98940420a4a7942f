/* py_ext: a C extension module that calls cudaMalloc with the GIL released
 * (Py_BEGIN_ALLOW_THREADS), as PyTorch's bindings and most GPU extensions do (tests/python).
 * Built by test_python.py for each interpreter under test, with that interpreter's headers
 * (sysconfig's include directory) and linked with the simulated libcudart.so.13. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <stddef.h>

/* the CUDA runtime's, declared here: the test needs no toolkit headers */
int cudaMalloc(void **p, size_t n);

static void *kept[64];
static int nkept;

/* The allocation itself: a native frame of this module (named by the report) under which the
 * Python frames of the caller must appear. */
__attribute__((noinline)) static int ext_cuda_alloc(size_t n)
{
    void *p = NULL;
    int rc = cudaMalloc(&p, n);
    if (rc == 0 && nkept < 64)
        kept[nkept++] = p; /* kept: live at the peak */
    return rc;
}

static PyObject *ext_alloc(PyObject *self, PyObject *args)
{
    (void)self;
    Py_ssize_t n;
    if (!PyArg_ParseTuple(args, "n", &n))
        return NULL;
    /* Py_BEGIN_ALLOW_THREADS ... Py_END_ALLOW_THREADS, spelled out (what the macros expand to) */
    PyThreadState *save = PyEval_SaveThread();
    int rc = ext_cuda_alloc((size_t)n);
    PyEval_RestoreThread(save);
    return PyLong_FromLong(rc);
}

static PyMethodDef methods[] = {
    {"alloc", ext_alloc, METH_VARARGS, "cudaMalloc(n) with the GIL released; returns its code"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "py_ext", NULL, -1, methods, NULL, NULL, NULL, NULL};

PyMODINIT_FUNC PyInit_py_ext(void);
PyMODINIT_FUNC PyInit_py_ext(void)
{
    return PyModule_Create(&module);
}
