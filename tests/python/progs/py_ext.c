/* py_ext: a C extension module that calls cudaMalloc with the GIL released
 * (Py_BEGIN_ALLOW_THREADS), as PyTorch's bindings and most GPU extensions do (tests/python).
 * Built by test_python.py for each interpreter under test, with that interpreter's headers
 * (sysconfig's include directory) and linked with the simulated libcudart.so.13. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

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

/* Like PyTorch's autograd engine threads (torch/csrc/autograd/python_engine.cpp, thread_init):
 * a C thread that creates a Python thread state once (PyGILState_Ensure), runs a little Python,
 * releases the GIL keeping the state, then allocates: a thread Python knows, with no frame. */
static void *engine_thread(void *arg)
{
    PyGILState_STATE g = PyGILState_Ensure();
    PyRun_SimpleString("_engine_ran = 1\n");
    PyThreadState *save = PyEval_SaveThread();
    intptr_t rc = ext_cuda_alloc((size_t)(uintptr_t)arg);
    PyEval_RestoreThread(save);
    PyGILState_Release(g);
    return (void *)rc;
}

static PyObject *ext_engine_alloc(PyObject *self, PyObject *args)
{
    (void)self;
    Py_ssize_t n;
    if (!PyArg_ParseTuple(args, "n", &n))
        return NULL;
    PyThreadState *save = PyEval_SaveThread(); /* the thread needs the GIL */
    pthread_t t;
    void *rc = (void *)-1;
    if (pthread_create(&t, NULL, engine_thread, (void *)(uintptr_t)n) == 0)
        pthread_join(t, &rc);
    PyEval_RestoreThread(save);
    return PyLong_FromLong((long)(intptr_t)rc);
}

static PyMethodDef methods[] = {
    {"alloc", ext_alloc, METH_VARARGS, "cudaMalloc(n) with the GIL released; returns its code"},
    {"engine_alloc", ext_engine_alloc, METH_VARARGS,
     "cudaMalloc(n) from a C thread with a Python thread state and no frame"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "py_ext", NULL, -1, methods, NULL, NULL, NULL, NULL};

PyMODINIT_FUNC PyInit_py_ext(void);
PyMODINIT_FUNC PyInit_py_ext(void)
{
    return PyModule_Create(&module);
}
