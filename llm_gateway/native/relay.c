/* The gateway's per-token path in C: an upstream connection's reads, its chunked body decoded as it arrives, and the
 * plain events of a stream written to the client from the read callback, with no Python frame per token.
 *
 * llm_gateway/upstream.py's _ChunkedBody (llhttp) and llm_gateway/gateway.py's _StreamRelay are the reference:
 * this module decodes the same bodies to the same bytes, and writes an event itself only when the Python relay
 * would have written exactly those bytes. Everything else (a usage chunk, the last event, the first token, a
 * piece that ends mid-event, a client that is not reading) is left to the Python path, untouched.
 * tests/llm/test_native_relay.py holds the two to the same answers.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <string.h>

#ifndef SOURCE_DIGEST
#define SOURCE_DIGEST "unknown"
#endif

/* A trailer section past this is refused (llhttp reads any; the engine sends none, and nothing here keeps them). */
#define MAX_TRAILER_BYTES (64 * 1024)

enum state {
    S_SIZE,        /* the chunk size's hex digits */
    S_EXT_NAME,    /* a chunk extension's name (after `;`) */
    S_EXT_VALUE,   /* its value as a token (after `=`) */
    S_EXT_QUOTED,  /* its value as a quoted string */
    S_EXT_ESCAPE,  /* the character after a backslash in it */
    S_EXT_END,     /* after the closing quote: `;` or CR */
    S_SIZE_LF,     /* the LF after the size line */
    S_DATA,        /* `remaining` bytes of chunk data */
    S_DATA_CR,     /* the CR after a chunk's data */
    S_DATA_LF,
    S_LINE_START,  /* after the last chunk: a trailer field or the final CRLF */
    S_TRAILER_NAME,
    S_TRAILER_VALUE,
    S_TRAILER_LF,
    S_END_LF,      /* the final LF */
    S_DONE
};

/* Interned attribute names, read on the Python objects the relay is given. */
static PyObject *str_pending, *str_done, *str_forwarded, *str_first_event_at, *str_write_paused, *str_disconnected,
    *str_response_complete, *str_response_started, *str_chunked_encoding, *str_body, *str__fed, *str__received;

/* ------------------------------------------------------------------------------------------------------------ */
/* EventRelay: where a stream's plain events go (the Python relay's state, the client's transport).             */

typedef struct {
    PyObject_HEAD
    PyObject *owner;   /* the Python relay (gateway._StreamRelay): `forwarded` */
    PyObject *events;  /* llm_gateway.usage.EventStream: `_pending` (bytes) and `done` */
    PyObject *record;  /* its RequestRecord: `first_event_at` */
    PyObject *write;   /* the client transport's write */
    PyObject *flow;    /* uvicorn's flow control: `write_paused` */
    PyObject *cycle;   /* uvicorn's request cycle: `disconnected`, `response_complete`, `response_started`, ... */
    int begun;         /* `forwarded` and `first_event_at` were seen set (they are never unset) */
    int head_sent;     /* response_started and chunked_encoding were seen true (they stay so for the cycle) */
} EventRelay;

static int
EventRelay_init(EventRelay *self, PyObject *args, PyObject *kwds)
{
    static char *names[] = {"owner", "events", "record", "write", "flow", "cycle", NULL};
    PyObject *owner, *events, *record, *write, *flow, *cycle;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "OOOOOO", names, &owner, &events, &record, &write, &flow, &cycle))
        return -1;
    if (!PyCallable_Check(write)) {
        PyErr_SetString(PyExc_TypeError, "write must be callable");
        return -1;
    }
    if (self->write != NULL) {  /* its fields are read while Python runs: they never change under a call */
        PyErr_SetString(PyExc_TypeError, "an EventRelay is initialised once");
        return -1;
    }
    Py_XSETREF(self->owner, Py_NewRef(owner));
    Py_XSETREF(self->events, Py_NewRef(events));
    Py_XSETREF(self->record, Py_NewRef(record));
    Py_XSETREF(self->write, Py_NewRef(write));
    Py_XSETREF(self->flow, Py_NewRef(flow));
    Py_XSETREF(self->cycle, Py_NewRef(cycle));
    self->begun = 0;
    self->head_sent = 0;
    return 0;
}

static int
EventRelay_traverse(EventRelay *self, visitproc visit, void *arg)
{
    Py_VISIT(self->owner);
    Py_VISIT(self->events);
    Py_VISIT(self->record);
    Py_VISIT(self->write);
    Py_VISIT(self->flow);
    Py_VISIT(self->cycle);
    return 0;
}

static int
EventRelay_clear(EventRelay *self)
{
    Py_CLEAR(self->owner);
    Py_CLEAR(self->events);
    Py_CLEAR(self->record);
    Py_CLEAR(self->write);
    Py_CLEAR(self->flow);
    Py_CLEAR(self->cycle);
    return 0;
}

static void
EventRelay_dealloc(EventRelay *self)
{
    PyObject_GC_UnTrack(self);
    EventRelay_clear(self);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

/* The truth of `obj.name`: 1, 0, or -1 with an exception set. */
static int
attr_true(PyObject *obj, PyObject *name)
{
    PyObject *value = PyObject_GetAttr(obj, name);
    if (value == NULL)
        return -1;
    int truth = PyObject_IsTrue(value);
    Py_DECREF(value);
    return truth;
}

/* 1 when the Python relay, given `data` now, would forward it unchanged and write it to the client at once (and
 * so would the server's write without a wait): see EventStream.feed, _StreamRelay.__call__ and uvicorn's
 * RequestResponseCycle fields as common/http/protocol.py's write_body_nowait checks them. 0 when not, -1 on error.
 */
static int
EventRelay_takes(EventRelay *self, const char *data, Py_ssize_t size)
{
    int truth;
    /* Whole events whose last is a JSON chunk (`}`), so neither `[DONE]` nor a piece of an event. */
    if (size < 3 || memcmp(data + size - 3, "}\n\n", 3) != 0)
        return 0;
    if (memmem(data, (size_t)size, "\"usage\"", 7) != NULL)
        return 0;
    PyObject *pending = PyObject_GetAttr(self->events, str_pending);
    if (pending == NULL)
        return -1;
    truth = PyObject_IsTrue(pending);
    Py_DECREF(pending);
    if (truth != 0)
        return truth < 0 ? -1 : 0;  /* the start of an event waits in the Python relay */
    if ((truth = attr_true(self->events, str_done)) != 0)
        return truth < 0 ? -1 : 0;
    if (!self->begun) {
        /* Until the Python relay has written an event and stamped the first token, it writes them all: the stamp,
         * and `forwarded` (which ends the heartbeats), are its own. */
        if ((truth = attr_true(self->owner, str_forwarded)) <= 0)
            return truth;
        PyObject *first = PyObject_GetAttr(self->record, str_first_event_at);
        if (first == NULL)
            return -1;
        self->begun = first != Py_None;
        Py_DECREF(first);
        if (!self->begun)
            return 0;
    }
    if (!self->head_sent) {
        if ((truth = attr_true(self->cycle, str_response_started)) <= 0)
            return truth;
        if ((truth = attr_true(self->cycle, str_chunked_encoding)) <= 0)
            return truth;
        self->head_sent = 1;
    }
    if ((truth = attr_true(self->flow, str_write_paused)) != 0)
        return truth < 0 ? -1 : 0;
    if ((truth = attr_true(self->cycle, str_disconnected)) != 0)
        return truth < 0 ? -1 : 0;
    if ((truth = attr_true(self->cycle, str_response_complete)) != 0)
        return truth < 0 ? -1 : 0;
    return 1;
}

/* Write `data` to the client as one chunk. 0, or -1 with an exception set (nothing is consumed then). */
static int
EventRelay_write(EventRelay *self, const char *data, Py_ssize_t size)
{
    char head[24];  /* the size in hex (16 digits at most) and CRLF; by hand: snprintf cost more than the copy */
    int head_size = 0;
    for (int shift = 60; shift >= 0; shift -= 4) {
        unsigned digit = (unsigned)(((size_t)size >> shift) & 0xf);
        if (digit != 0 || head_size > 0 || shift == 0)
            head[head_size++] = "0123456789abcdef"[digit];
    }
    head[head_size++] = '\r';
    head[head_size++] = '\n';
    PyObject *framed = PyBytes_FromStringAndSize(NULL, head_size + size + 2);
    if (framed == NULL)
        return -1;
    char *out = PyBytes_AS_STRING(framed);
    memcpy(out, head, (size_t)head_size);
    memcpy(out + head_size, data, (size_t)size);
    memcpy(out + head_size + size, "\r\n", 2);
    PyObject *result = PyObject_CallOneArg(self->write, framed);  /* `write` is never replaced: see init */
    Py_DECREF(framed);
    if (result == NULL)
        return -1;
    Py_DECREF(result);
    return 0;
}

static PyTypeObject EventRelayType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "llm_gateway.native._relay.EventRelay",
    .tp_doc = PyDoc_STR("EventRelay(owner, events, record, write, flow, cycle): where a ChunkedBody writes a stream's "
                        "plain events itself (the Python relay, its EventStream and RequestRecord, the client "
                        "transport's write, uvicorn's flow control and request cycle)."),
    .tp_basicsize = sizeof(EventRelay),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)EventRelay_init,
    .tp_traverse = (traverseproc)EventRelay_traverse,
    .tp_clear = (inquiry)EventRelay_clear,
    .tp_dealloc = (destructor)EventRelay_dealloc,
};

/* ------------------------------------------------------------------------------------------------------------ */
/* ChunkedBody: the same interface as upstream.py's _ChunkedBody.                                                */

typedef struct {
    PyObject_HEAD
    PyObject *error_class;  /* what a malformed body raises (upstream.RemoteProtocolError) */
    PyObject *error;        /* the body's protocol error, once one was found */
    PyObject *relay;        /* an EventRelay, or NULL */
    char *buffer;           /* data decoded and not yet taken */
    Py_ssize_t length, capacity;
    Py_ssize_t size;        /* bytes received since the last take, framing included (the flow control's measure) */
    uint64_t remaining;     /* of the current chunk's data, or its size while its digits come */
    Py_ssize_t trailer_bytes;
    int digits;             /* the size has a digit */
    int token;              /* the current token (extension or trailer name, extension value) has a character */
    enum state state;
    int trailing;
    int closed;             /* close() was called: later bytes are not decoded */
} ChunkedBody;

static int
ChunkedBody_init(ChunkedBody *self, PyObject *args, PyObject *kwds)
{
    static char *names[] = {"error_class", NULL};
    PyObject *error_class;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "O", names, &error_class))
        return -1;
    if (self->error_class != NULL) {
        PyErr_SetString(PyExc_TypeError, "a ChunkedBody is initialised once");
        return -1;
    }
    Py_XSETREF(self->error_class, Py_NewRef(error_class));
    Py_CLEAR(self->error);
    Py_CLEAR(self->relay);
    self->length = self->size = self->trailer_bytes = 0;
    self->remaining = 0;
    self->digits = self->token = 0;
    self->state = S_SIZE;
    self->trailing = self->closed = 0;
    return 0;
}

static int
ChunkedBody_traverse(ChunkedBody *self, visitproc visit, void *arg)
{
    Py_VISIT(self->error_class);
    Py_VISIT(self->error);
    Py_VISIT(self->relay);
    return 0;
}

static int
ChunkedBody_clear(ChunkedBody *self)
{
    Py_CLEAR(self->error_class);
    Py_CLEAR(self->error);
    Py_CLEAR(self->relay);
    return 0;
}

static void
ChunkedBody_dealloc(ChunkedBody *self)
{
    PyObject_GC_UnTrack(self);
    ChunkedBody_clear(self);
    PyMem_Free(self->buffer);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static int
hex_value(unsigned char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

/* RFC 9110 tchar: what a token (an extension's or a trailer field's name, an extension's value) is made of. */
static int
is_tchar(unsigned char c)
{
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')
           || (c != 0 && strchr("!#$%&'*+-.^_`|~", c) != NULL);
}

/* What a field value and a quoted string may hold besides their delimiters: HTAB, SP, VCHAR, obs-text. */
static int
is_field_char(unsigned char c)
{
    return c == '\t' || (c >= 0x20 && c != 0x7f);
}

/* Keep the body's protocol error (raised to its reader by take()). 0, or -1 if even that failed. */
static int
ChunkedBody_fail(ChunkedBody *self, const char *reason)
{
    self->error = PyObject_CallFunction(self->error_class, "s", reason);
    return self->error == NULL ? -1 : 0;
}

static int
ChunkedBody_keep(ChunkedBody *self, const char *data, Py_ssize_t size)
{
    if (self->length + size > self->capacity) {
        Py_ssize_t capacity = self->capacity ? self->capacity : 4096;
        while (capacity < self->length + size)
            capacity *= 2;
        char *buffer = PyMem_Realloc(self->buffer, (size_t)capacity);
        if (buffer == NULL) {
            PyErr_NoMemory();
            return -1;
        }
        self->buffer = buffer;
        self->capacity = capacity;
    }
    memcpy(self->buffer + self->length, data, (size_t)size);
    self->length += size;
    return 0;
}

#define FAIL(reason) return ChunkedBody_fail(self, "a malformed chunked body: " reason)

/* Decode `data` into the buffer. 0, or -1 with an exception set (memory); a malformed body sets `error`. What is
 * refused is what llhttp (strict, as httptools runs it) refuses: a size that is not hex or overflows 64 bits, an
 * extension that is not `;name[=token|"quoted"]` with no spaces, a trailer field that is not `name: value`, a CR or
 * LF where the other belongs. It refuses a little more: an extension with an empty name, a trailer section over
 * MAX_TRAILER_BYTES, and any byte after the body's end marks the connection `trailing` (llhttp skips CRLFs there);
 * no engine sends those, and each only retires a connection sooner. */
static int
ChunkedBody_decode(ChunkedBody *self, const char *data, Py_ssize_t size)
{
    const char *end = data + size;
    for (const char *p = data; p < end; p++) {
        unsigned char c = (unsigned char)*p;
        switch (self->state) {
        case S_SIZE: {
            int value = hex_value(c);
            if (value >= 0) {
                if (self->remaining > (UINT64_MAX >> 4))
                    FAIL("a chunk size too large");
                self->remaining = self->remaining * 16 + (uint64_t)value;
                self->digits = 1;
            } else if (self->digits && c == ';') {
                self->state = S_EXT_NAME;
                self->token = 0;
            } else if (self->digits && c == '\r') {
                self->state = S_SIZE_LF;
            } else {
                FAIL("an invalid character in a chunk size");
            }
            break;
        }
        case S_EXT_NAME:
        case S_EXT_VALUE:
            if (is_tchar(c)) {
                self->token = 1;
            } else if ((self->token || self->state == S_EXT_VALUE) && (c == ';' || c == '\r')) {  /* `a=` too */
                self->state = c == ';' ? S_EXT_NAME : S_SIZE_LF;
                self->token = 0;
            } else if (self->state == S_EXT_NAME && self->token && c == '=') {
                self->state = S_EXT_VALUE;
                self->token = 0;
            } else if (self->state == S_EXT_VALUE && !self->token && c == '"') {
                self->state = S_EXT_QUOTED;
            } else {
                FAIL("an invalid character in a chunk extension");
            }
            break;
        case S_EXT_QUOTED:
            if (c == '"')
                self->state = S_EXT_END;
            else if (c == '\\')
                self->state = S_EXT_ESCAPE;
            else if (!is_field_char(c))
                FAIL("an invalid character in a chunk extension");
            break;
        case S_EXT_ESCAPE:
            if (!is_field_char(c))
                FAIL("an invalid character in a chunk extension");
            self->state = S_EXT_QUOTED;
            break;
        case S_EXT_END:
            if (c != ';' && c != '\r')
                FAIL("an invalid character in a chunk extension");
            self->state = c == ';' ? S_EXT_NAME : S_SIZE_LF;
            self->token = 0;
            break;
        case S_SIZE_LF:
            if (c != '\n')
                FAIL("no LF after a chunk size");
            self->digits = 0;
            self->state = self->remaining == 0 ? S_LINE_START : S_DATA;
            break;
        case S_DATA: {
            Py_ssize_t available = end - p;
            Py_ssize_t take = self->remaining < (uint64_t)available ? (Py_ssize_t)self->remaining : available;
            if (ChunkedBody_keep(self, p, take) < 0)
                return -1;
            self->remaining -= (uint64_t)take;
            p += take - 1;
            if (self->remaining == 0)
                self->state = S_DATA_CR;
            break;
        }
        case S_DATA_CR:
            if (c != '\r')
                FAIL("no CRLF after a chunk's data");
            self->state = S_DATA_LF;
            break;
        case S_DATA_LF:
            if (c != '\n')
                FAIL("no CRLF after a chunk's data");
            self->state = S_SIZE;
            break;
        case S_LINE_START:
            if (c == '\r') {
                self->state = S_END_LF;
                break;
            }
            self->state = S_TRAILER_NAME;
            self->token = 0;
            /* fall through */
        case S_TRAILER_NAME:
            if (++self->trailer_bytes > MAX_TRAILER_BYTES)
                FAIL("a trailer section too large");
            if (is_tchar(c))
                self->token = 1;
            else if (self->token && c == ':')
                self->state = S_TRAILER_VALUE;
            else
                FAIL("an invalid trailer field");
            break;
        case S_TRAILER_VALUE:
            if (++self->trailer_bytes > MAX_TRAILER_BYTES)
                FAIL("a trailer section too large");
            if (c == '\r')
                self->state = S_TRAILER_LF;
            else if (!is_field_char(c))
                FAIL("an invalid trailer field");
            break;
        case S_TRAILER_LF:
            if (c != '\n')
                FAIL("no LF after a trailer field");
            self->state = S_LINE_START;
            break;
        case S_END_LF:
            if (c != '\n')
                FAIL("no LF at its end");
            self->state = S_DONE;
            break;
        case S_DONE:
            self->trailing = 1;  /* bytes after the body's end: the connection is not reused */
            return 0;
        }
    }
    return 0;
}

#undef FAIL

static PyObject *
ChunkedBody_feed(ChunkedBody *self, PyObject *arg)
{
    if (self->error_class == NULL) {
        PyErr_SetString(PyExc_TypeError, "ChunkedBody.__init__ was not called");
        return NULL;
    }
    Py_buffer view;
    if (PyObject_GetBuffer(arg, &view, PyBUF_SIMPLE) < 0)
        return NULL;
    if (self->state == S_DONE || self->error != NULL || self->closed) {
        self->trailing = 1;
        PyBuffer_Release(&view);
        Py_RETURN_FALSE;
    }
    self->size += view.len;
    int failed = ChunkedBody_decode(self, view.buf, view.len);
    PyBuffer_Release(&view);
    if (failed < 0)
        return NULL;
    if (self->relay != NULL && self->length > 0 && self->state != S_DONE && self->error == NULL) {
        /* Held for the call: the attribute reads and the write run Python, which may let go of the relay. */
        EventRelay *relay = (EventRelay *)Py_NewRef(self->relay);
        Py_ssize_t written = self->length;
        int takes = EventRelay_takes(relay, self->buffer, written);
        if (takes > 0)
            takes = EventRelay_write(relay, self->buffer, written) < 0 ? -1 : 1;
        Py_DECREF(relay);
        if (takes < 0)
            return NULL;
        if (takes > 0) {  /* what was written goes; what a re-entered feed added stays */
            self->length -= written;
            memmove(self->buffer, self->buffer + written, (size_t)self->length);
            self->size = self->length;
        }
    }
    return PyBool_FromLong(self->length == 0 && self->state != S_DONE && self->error == NULL);
}

static PyObject *
ChunkedBody_take(ChunkedBody *self, PyObject *Py_UNUSED(ignored))
{
    if (self->length == 0) {
        if (self->error != NULL) {
            PyErr_SetObject((PyObject *)Py_TYPE(self->error), self->error);
            return NULL;
        }
        return PyBytes_FromStringAndSize(NULL, 0);
    }
    PyObject *data = PyBytes_FromStringAndSize(self->buffer, self->length);
    if (data == NULL)
        return NULL;
    self->length = 0;
    self->size = 0;
    return data;
}

static PyObject *
ChunkedBody_close(ChunkedBody *self, PyObject *Py_UNUSED(ignored))
{
    self->closed = 1;
    Py_CLEAR(self->relay);
    Py_RETURN_NONE;
}

static PyObject *
ChunkedBody_get_done(ChunkedBody *self, void *Py_UNUSED(closure))
{
    return PyBool_FromLong(self->state == S_DONE);
}

static PyObject *
ChunkedBody_get_trailing(ChunkedBody *self, void *Py_UNUSED(closure))
{
    return PyBool_FromLong(self->trailing);
}

static PyObject *
ChunkedBody_get_error(ChunkedBody *self, void *Py_UNUSED(closure))
{
    return Py_NewRef(self->error != NULL ? self->error : Py_None);
}

static PyObject *
ChunkedBody_get_size(ChunkedBody *self, void *Py_UNUSED(closure))
{
    return PyLong_FromSsize_t(self->size);
}

static PyObject *
ChunkedBody_get_relay(ChunkedBody *self, void *Py_UNUSED(closure))
{
    return Py_NewRef(self->relay != NULL ? self->relay : Py_None);
}

static int
ChunkedBody_set_relay(ChunkedBody *self, PyObject *value, void *Py_UNUSED(closure))
{
    if (value != NULL && value != Py_None
        && (!PyObject_TypeCheck(value, &EventRelayType) || ((EventRelay *)value)->write == NULL)) {
        PyErr_SetString(PyExc_TypeError, "relay must be an initialised EventRelay or None");
        return -1;
    }
    Py_XSETREF(self->relay, value == NULL || value == Py_None ? NULL : Py_NewRef(value));
    return 0;
}

static PyMethodDef ChunkedBody_methods[] = {
    {"feed", (PyCFunction)ChunkedBody_feed, METH_O,
     PyDoc_STR("Decode `data` (a malformed chunk is kept as `error`); with a relay, write the stream's plain events "
               "to the client. True when nothing is left for the reader now (the bytes were framing, or relayed).")},
    {"take", (PyCFunction)ChunkedBody_take, METH_NOARGS,
     PyDoc_STR("The data decoded since the last call (raises the body's protocol error once its data is read).")},
    {"close", (PyCFunction)ChunkedBody_close, METH_NOARGS,
     PyDoc_STR("Let go of the relay; later bytes are not decoded (they mark the body `trailing`).")},
    {NULL}
};

static PyGetSetDef ChunkedBody_getset[] = {
    {"done", (getter)ChunkedBody_get_done, NULL, PyDoc_STR("The body has ended."), NULL},
    {"trailing", (getter)ChunkedBody_get_trailing, NULL, PyDoc_STR("Bytes came after the body's end."), NULL},
    {"error", (getter)ChunkedBody_get_error, NULL, PyDoc_STR("The body's protocol error, or None."), NULL},
    {"size", (getter)ChunkedBody_get_size, NULL, PyDoc_STR("Bytes received since the last take."), NULL},
    {"relay", (getter)ChunkedBody_get_relay, (setter)ChunkedBody_set_relay,
     PyDoc_STR("The EventRelay that writes plain events in feed, or None."), NULL},
    {NULL}
};

static PyTypeObject ChunkedBodyType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "llm_gateway.native._relay.ChunkedBody",
    .tp_doc = PyDoc_STR("ChunkedBody(error_class): a chunked body decoded as its bytes arrive."),
    .tp_basicsize = sizeof(ChunkedBody),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)ChunkedBody_init,
    .tp_traverse = (traverseproc)ChunkedBody_traverse,
    .tp_clear = (inquiry)ChunkedBody_clear,
    .tp_dealloc = (destructor)ChunkedBody_dealloc,
    .tp_methods = ChunkedBody_methods,
    .tp_getset = ChunkedBody_getset,
};

/* ------------------------------------------------------------------------------------------------------------ */
/* Receiver: an upstream connection's data_received, with no Python frame for a read a native body takes whole.  */

typedef struct {
    PyObject_HEAD
    PyObject *connection;  /* upstream._Connection: `body`, `_fed(body, error)` and `_received(data)` */
} Receiver;

static int
Receiver_init(Receiver *self, PyObject *args, PyObject *kwds)
{
    static char *names[] = {"connection", NULL};
    PyObject *connection;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "O", names, &connection))
        return -1;
    Py_XSETREF(self->connection, Py_NewRef(connection));
    return 0;
}

static int
Receiver_traverse(Receiver *self, visitproc visit, void *arg)
{
    Py_VISIT(self->connection);
    return 0;
}

static int
Receiver_clear(Receiver *self)
{
    Py_CLEAR(self->connection);
    return 0;
}

static void
Receiver_dealloc(Receiver *self)
{
    PyObject_GC_UnTrack(self);
    Receiver_clear(self);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

/* What _Connection._received does with `data`: a native body is fed here, and only when the read leaves something
 * for Python (a piece for the reader or the Python relay, the body's end, an error) does `_fed` run; bytes for
 * no native body go to `_received` whole. */
static PyObject *
Receiver_receive(Receiver *self, PyObject *data)
{
    if (self->connection == NULL) {
        PyErr_SetString(PyExc_TypeError, "Receiver.__init__ was not called");
        return NULL;
    }
    PyObject *body = PyObject_GetAttr(self->connection, str_body);
    if (body == NULL)
        return NULL;
    if (!PyObject_TypeCheck(body, &ChunkedBodyType)) {
        Py_DECREF(body);
        return PyObject_CallMethodOneArg(self->connection, str__received, data);
    }
    PyObject *result = NULL;
    PyObject *fed = ChunkedBody_feed((ChunkedBody *)body, data);
    if (fed == Py_True) {
        result = Py_NewRef(Py_None);
    }
    else if (fed != NULL) {
        result = PyObject_CallMethodObjArgs(self->connection, str__fed, body, Py_None, NULL);
    }
    else if (PyErr_ExceptionMatches(PyExc_Exception)) {  /* as `except Exception` in _received */
        PyObject *type, *value, *traceback;
        PyErr_Fetch(&type, &value, &traceback);
        PyErr_NormalizeException(&type, &value, &traceback);
        if (traceback != NULL)
            PyException_SetTraceback(value, traceback);
        result = PyObject_CallMethodObjArgs(self->connection, str__fed, body, value, NULL);
        Py_XDECREF(type);
        Py_XDECREF(value);
        Py_XDECREF(traceback);
    }
    Py_XDECREF(fed);
    Py_DECREF(body);
    return result;
}

static PyMethodDef Receiver_methods[] = {
    {"receive", (PyCFunction)Receiver_receive, METH_O,
     PyDoc_STR("receive(data): the connection's data_received (see _Connection._received).")},
    {NULL, NULL, 0, NULL},
};

static PyTypeObject ReceiverType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "llm_gateway.native._relay.Receiver",
    .tp_doc = PyDoc_STR("Receiver(connection): an upstream._Connection's data_received in C, as `receive`."),
    .tp_basicsize = sizeof(Receiver),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)Receiver_init,
    .tp_traverse = (traverseproc)Receiver_traverse,
    .tp_clear = (inquiry)Receiver_clear,
    .tp_dealloc = (destructor)Receiver_dealloc,
    .tp_methods = Receiver_methods,
};

/* ------------------------------------------------------------------------------------------------------------ */

static struct PyModuleDef relay_module = {
    PyModuleDef_HEAD_INIT,
    .m_name = "llm_gateway.native._relay",
    .m_doc = PyDoc_STR("The gateway's chunked body decoder and stream relay, in C (see relay.c)."),
    .m_size = -1,
};

PyMODINIT_FUNC
PyInit__relay(void)
{
    struct { PyObject **slot; const char *text; } names[] = {
        {&str_pending, "_pending"}, {&str_done, "done"}, {&str_forwarded, "forwarded"},
        {&str_first_event_at, "first_event_at"},
        {&str_write_paused, "write_paused"}, {&str_disconnected, "disconnected"},
        {&str_response_complete, "response_complete"}, {&str_response_started, "response_started"},
        {&str_chunked_encoding, "chunked_encoding"}, {&str_body, "body"}, {&str__fed, "_fed"},
        {&str__received, "_received"},
    };
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        if (*names[i].slot == NULL && (*names[i].slot = PyUnicode_InternFromString(names[i].text)) == NULL)
            return NULL;
    }
    if (PyType_Ready(&EventRelayType) < 0 || PyType_Ready(&ChunkedBodyType) < 0 || PyType_Ready(&ReceiverType) < 0)
        return NULL;
    PyObject *module = PyModule_Create(&relay_module);
    if (module == NULL)
        return NULL;
    if (PyModule_AddObjectRef(module, "EventRelay", (PyObject *)&EventRelayType) < 0
        || PyModule_AddObjectRef(module, "ChunkedBody", (PyObject *)&ChunkedBodyType) < 0
        || PyModule_AddObjectRef(module, "Receiver", (PyObject *)&ReceiverType) < 0
        || PyModule_AddStringConstant(module, "SOURCE_DIGEST", SOURCE_DIGEST) < 0) {
        Py_DECREF(module);
        return NULL;
    }
    return module;
}
