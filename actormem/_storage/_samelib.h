/* same_library(path) for the two modules over SQLite's C API (_crows.c, _cwrite.c).
 *
 * A matching sqlite3_sourceid() does not prove that this module and Python's _sqlite3
 * run the same loaded copy of SQLite: _sqlite3 may carry a static copy, or another
 * libsqlite3 of the same version may be loaded. Two copies in one process keep separate
 * POSIX-lock bookkeeping in their unix VFS, so one copy's close() of a descriptor drops
 * the other copy's locks on the file (SQLite's "How To Corrupt An SQLite Database File",
 * 2.2.1). same_library(path) is True only if the shared object already loaded from
 * ``path`` (RTLD_NOLOAD: never loads it) resolves sqlite3_sourceid to the very function
 * this module calls (an exported function's address is canonical in the process).
 * Any failure is False: the caller then takes the Python path.
 */
#ifndef ACTORMEM_SAMELIB_H
#define ACTORMEM_SAMELIB_H

#include <Python.h>
#include <dlfcn.h>
#include <string.h>
#include <sqlite3.h>

PyDoc_STRVAR(same_library_doc,
"same_library(path) -> bool\n\n"
"Whether the shared object already loaded from path (Python's _sqlite3 module) resolves\n"
"sqlite3_sourceid to the same function as this module: the same loaded copy of SQLite.\n"
"False if path is not loaded (it is never loaded here), or does not export the symbol.\n"
"O(1).");

static PyObject *
same_library(PyObject *self, PyObject *args)
{
    const char *path;
    void *handle, *symbol = NULL;
    const char *(*theirs)(void) = NULL;
    const char *(*ours)(void) = sqlite3_sourceid;
    if (!PyArg_ParseTuple(args, "s:same_library", &path)) return NULL;
    Py_BEGIN_ALLOW_THREADS
    handle = dlopen(path, RTLD_NOLOAD | RTLD_LAZY);
    if (handle) {
        symbol = dlsym(handle, "sqlite3_sourceid");
        dlclose(handle);  /* only drops the reference RTLD_NOLOAD added */
    }
    if (!symbol) dlerror();  /* clear this thread's message */
    Py_END_ALLOW_THREADS
    if (!symbol) Py_RETURN_FALSE;
    memcpy(&theirs, &symbol, sizeof theirs);  /* POSIX: a data pointer to a function */
    return PyBool_FromLong(theirs == ours);
}

#endif
