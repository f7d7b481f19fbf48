"""glimpse — Python binding of libglimpse.so.0, the vision-language model runtime (CLIP, SigLIP, BLIP).
Pure Python over the C API through ctypes: nothing is compiled at install. Every call into the library
runs without the GIL, so threads sharing one Model run in parallel."""

import ctypes
import mmap
import os
import stat
import threading
from collections import namedtuple

import numpy as np

from . import _library as _c
from ._library import lib as _lib

__all__ = ["GlimpseError", "Model", "Image", "Video", "Index", "Caption", "ChatReply", "TaskResult", "Region", "IndexSummary", "Explanation", "ExplainMap",
           "is_video", "video_sampling", "version", "dot_rows", "open_regular"]


def version():
    """The version of the libglimpse actually loaded, "MAJOR.MINOR.PATCH"."""
    return _lib.glimpse_version().decode()


def dot_rows(matrix, query, rows=None, threads=0):
    """matrix[rows] @ query as float32 [len(rows)], read in place (nothing copied out): matrix is a C-contiguous
    float32 [count, dim] array or memory map (a vectors.npy opened with mmap_mode="r"), rows int64 row numbers
    (each in [0, count); sort them to read a mapped file forward; None: every row), query float32 [dim]. The
    exact re-scoring of glimpse.faiss's candidates: the next rows prefetched while one is summed, over threads
    (0: every core). Sums in float32 where the CPU has AVX-512, else in double."""
    if not (isinstance(matrix, np.ndarray) and matrix.ndim == 2 and matrix.dtype == np.float32
            and matrix.flags.c_contiguous):
        raise ValueError("dot_rows: matrix must be a C-contiguous float32 [count, dim] array")
    query = np.ascontiguousarray(query, dtype=np.float32).reshape(-1)
    if query.shape[0] != matrix.shape[1]:
        raise ValueError(f"dot_rows: a query of {query.shape[0]} for rows of {matrix.shape[1]}")
    if rows is not None:
        rows = np.ascontiguousarray(rows, dtype=np.int64).reshape(-1)
    n = matrix.shape[0] if rows is None else rows.shape[0]
    out = np.empty(n, np.float32)
    if n:
        _check(_lib.glimpse_dot_rows(matrix.ctypes.data, matrix.shape[0], matrix.shape[1],
                                     None if rows is None else rows.ctypes.data, n, _floats(query), int(threads),
                                     _floats(out)))
    return out


# ------------------------------------------------------------------ errors

class GlimpseError(Exception):
    """A failure reported by libglimpse: str(error) is glimpse's own message (which file, which tensor,
    which field); .status is the status name ("NOT_FOUND", "BAD_FORMAT", ...). The subclasses below
    also derive from the matching built-in exception, so `except FileNotFoundError` works too."""

    def __init__(self, status, message):
        self.status = _c.STATUS_NAMES[status] if 0 <= status < len(_c.STATUS_NAMES) else str(status)
        self.message = message
        super().__init__(message)


class InvalidArgumentError(GlimpseError, ValueError):
    pass


class NotFoundError(GlimpseError, FileNotFoundError):
    pass


class InputOutputError(GlimpseError, OSError):
    pass


class CancelledError(GlimpseError):
    pass


class BusyError(GlimpseError):
    pass


_ERROR_CLASSES = {"INVALID_ARGUMENT": InvalidArgumentError, "NOT_FOUND": NotFoundError, "IO": InputOutputError,
                  "CANCELLED": CancelledError, "BUSY": BusyError}


def _check(status, context=None):
    """Raises the GlimpseError of a failed call. glimpse_last_error is per thread, and ctypes makes the
    call on the calling thread, so it is read here before anything else calls into the library."""
    if status == 0:
        return
    detail = _lib.glimpse_last_error().decode(errors="replace")
    if not detail:
        detail = _lib.glimpse_status_string(status).decode()
    if context:
        detail = f"{context}: {detail}"
    name = _c.STATUS_NAMES[status] if 0 <= status < len(_c.STATUS_NAMES) else ""
    raise _ERROR_CLASSES.get(name, GlimpseError)(status, detail)


class _CallbackGuard:
    """Runs a Python callback for C: an exception it raises is kept (and the C call cancelled), then
    raised again by reraise() once the C call has returned, instead of being lost inside ctypes."""

    def __init__(self):
        self.error = None

    def run(self, function, *arguments):
        if self.error is not None:
            return True
        try:
            return bool(function(*arguments))
        except BaseException as error:  # re-raised after the call, whatever it is
            self.error = error
            return True

    def reraise(self):
        if self.error is not None:
            raise self.error


def _encode_path(path):
    return os.fsencode(os.fspath(path))


def open_regular(path):
    """Opens path for reading in binary, as open(path, "rb") does, but only a regular file (links followed):
    a named pipe, a device or a folder raises InputOutputError at once, as glimpse's C tools refuse them,
    instead of blocking until something writes to a pipe. The caller closes the file (or uses `with`)."""
    descriptor = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)  # a pipe's open returns at once
    try:
        mode = os.fstat(descriptor).st_mode
        if not stat.S_ISREG(mode):
            what = ("a named pipe, not a regular file (not read: it may never end)" if stat.S_ISFIFO(mode)
                    else "a folder, not a file" if stat.S_ISDIR(mode) else "not a regular file")
            raise InputOutputError(_c.STATUS_NAMES.index("IO"), f"{os.fsdecode(os.fspath(path))}: {what}")
        os.set_blocking(descriptor, True)
        return os.fdopen(descriptor, "rb")
    except BaseException:
        os.close(descriptor)
        raise


def _whole_number(what, value, minimum):
    """value as an int of at least minimum; anything else (a str, a float, a bool) raises: a setting given
    in the wrong type is a mistake to say, not to guess at."""
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise TypeError(f"glimpse: {what} is a whole number, not {value!r}")
    if value < minimum:
        raise ValueError(f"glimpse: {what} is at least {minimum}, not {value}")
    return int(value)


def _floats(array):
    return array.ctypes.data_as(_c.c_float_p)


def _handles(images):
    return (ctypes.c_void_p * len(images))(*[image._handle for image in images])


def _c_text(text):
    """text (made a str) as the library takes it: UTF-8, ending at the first NUL, so a text that holds one is
    refused rather than passed on cut short."""
    encoded = str(text).encode()
    if b"\0" in encoded:
        raise ValueError(f"glimpse: a text cannot hold a NUL character (\\x00), as {str(text)[:40]!r}... does")
    return encoded


def _texts(texts):
    if isinstance(texts, str):
        texts = [texts]
    texts = list(texts)
    for text in texts:
        if not isinstance(text, str):
            raise TypeError(f"glimpse: texts are str, not {type(text).__name__} ({text!r})")
    encoded = [_c_text(text) for text in texts]
    return encoded, (ctypes.c_char_p * len(encoded))(*encoded)


class _Handle:
    """What owns a library handle: close() frees it, and so do `with` and the garbage collector."""

    def __del__(self):
        self.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


# ------------------------------------------------------------------ images

class Image(_Handle):
    """A decoded picture, held by the library: from a file path (str or os.PathLike), encoded bytes
    (JPEG, PNG, WebP, TIFF, HEIC, AVIF, BMP, GIF, TGA, PNM), or a numpy uint8 array H x W x 3 (RGB) or
    H x W x 4 (RGBA, alpha dropped) in any memory layout (a view that is not C-contiguous is copied).
    Model methods accept these sources directly; make an Image to decode once and reuse it."""

    def __init__(self, source, max_pixels=None, ignore_exif_orientation=False):
        self._handle = None
        handle = ctypes.c_void_p()
        if isinstance(source, np.ndarray):
            status, what = self._from_array(source, handle), "numpy array"
        else:
            params = _lib.glimpse_image_default_params()
            if max_pixels is not None:
                params.max_pixels = max_pixels
            params.ignore_exif_orientation = bool(ignore_exif_orientation)
            if isinstance(source, (bytes, bytearray, memoryview)):
                data = bytes(source)
                status = _lib.glimpse_image_load_memory(data, len(data), ctypes.byref(params), ctypes.byref(handle))
                what = f"{len(data)} bytes in memory"
            elif isinstance(source, (str, os.PathLike)):
                status = _lib.glimpse_image_load_file(_encode_path(source), ctypes.byref(params),
                                                      ctypes.byref(handle))
                what = None  # glimpse's message names the file
            else:
                raise TypeError(f"glimpse.Image: a path, bytes or a numpy array, not {type(source).__name__}")
        _check(status, what)
        self._handle = handle.value

    @staticmethod
    def _from_array(array, handle):
        if array.dtype != np.uint8 or array.ndim != 3 or array.shape[2] not in (3, 4):
            raise ValueError(f"glimpse.Image: a uint8 array of shape (height, width, 3 or 4), not {array.dtype} "
                             f"{array.shape}")
        channels = array.shape[2]
        # rows may be apart (a crop of a larger array); pixels within a row must be packed
        packed_rows = array.strides[2] == 1 and array.strides[1] == channels
        if not (packed_rows and array.strides[0] >= channels * array.shape[1]):
            array = np.ascontiguousarray(array)
        pixel_format = _c.PIXEL_FORMAT_RGB8 if channels == 3 else _c.PIXEL_FORMAT_RGBA8
        return _lib.glimpse_image_from_pixels(array.ctypes.data, array.shape[1], array.shape[0], array.strides[0],
                                              pixel_format, ctypes.byref(handle))

    @property
    def width(self):
        return _lib.glimpse_image_width(self._handle)

    @property
    def height(self):
        return _lib.glimpse_image_height(self._handle)

    def pixels(self):
        """The decoded RGB pixels (upright by EXIF unless asked otherwise), a uint8 array [height, width, 3]
        copied out of the library's."""
        shape = (self.height, self.width, 3)
        return np.ctypeslib.as_array(_lib.glimpse_image_pixels(self._handle), shape=shape).copy()

    def close(self):
        if self._handle:
            _lib.glimpse_image_free(self._handle)
            self._handle = None


    @classmethod
    def _adopt(cls, handle):
        """An Image owning a handle the library made (a video's frame)."""
        image = cls.__new__(cls)
        image._handle = handle
        return image


# ------------------------------------------------------------------ videos

def _video_options(every=None, scenes=None, max_pixels=None, ignore_rotation=False):
    options = _lib.glimpse_video_default_options()
    if scenes is not None:
        if not float(scenes) > 0:
            raise ValueError(f"glimpse: scenes is a threshold above 0 (0.1 is the usual), not {scenes!r}")
        options.scene_threshold = float(scenes)
    elif every is not None:
        if not float(every) > 0:
            raise ValueError(f"glimpse: every is a number of seconds above 0, not {every!r}")
        options.every_seconds = float(every)
    options.max_pixels = int(max_pixels or 0)
    options.ignore_rotation = bool(ignore_rotation)
    return options


def video_sampling(every=None, scenes=None):
    """How Video(..., every, scenes) samples, in the words an index records ("every 2 s", "at scene changes
    of 0.1"): glimpse.dask's manifest keeps it, and glimpse index --import refuses to mix two samplings."""
    text = ctypes.create_string_buffer(64)
    _lib.glimpse_video_sampling_text(ctypes.byref(_video_options(every, scenes)), text, len(text))
    return text.value.decode()


def is_video(source):
    """Whether a file (a path) or bytes hold a video container glimpse reads (MP4/MOV, Matroska/WebM, AVI,
    MPEG-TS/PS, FLV, ASF, Ogg) rather than a still picture; judged from the first MiB."""
    if isinstance(source, (str, os.PathLike)):
        with open_regular(source) as file:
            source = file.read(1 << 20)
    data = bytes(source)
    return bool(_lib.glimpse_is_video(data, len(data)))


class Video(_Handle):
    """The frames sampled from a video, as glimpse index takes them: iterating yields (seconds, Image) in
    order, seconds counted from the start of the file. source is a path (memory-mapped, never read whole)
    or the file's bytes. Sampling: the first frame at or after every `every` seconds (default 2), or, with
    `scenes`, a frame wherever the picture changes by that much (0.1 is glimpse index --scenes's default).
    Frames are upright (the stream's display matrix) unless ignore_rotation; a frame with more pixels than
    max_pixels is refused. A damaged packet is skipped; a video where no frame decodes raises GlimpseError.
    `whole` is False for a video damaged or cut short (known when it opens): its frames before the damage
    are still given. One Video is read by one thread at a time."""

    def __init__(self, source, every=None, scenes=None, max_pixels=None, ignore_rotation=False):
        self._handle, self._map, self._view, self._data = None, None, None, None
        options = _video_options(every, scenes, max_pixels, ignore_rotation)
        if isinstance(source, (str, os.PathLike)):
            label = _encode_path(source)
            with open_regular(source) as file:
                size = os.fstat(file.fileno()).st_size
                if size == 0:
                    raise GlimpseError(_c.STATUS_NAMES.index("BAD_FORMAT"), f"{os.fspath(source)}: an empty file")
                # copy-on-write: a writable view for ctypes; the library only reads it
                self._map = mmap.mmap(file.fileno(), 0, access=mmap.ACCESS_COPY)
            self._view = (ctypes.c_char * size).from_buffer(self._map)
            address = ctypes.addressof(self._view)
        elif isinstance(source, (bytes, bytearray, memoryview)):
            label, self._data = b"video in memory", bytes(source)
            size, address = len(self._data), ctypes.cast(ctypes.c_char_p(self._data), ctypes.c_void_p).value
        else:
            raise TypeError(f"glimpse.Video: a path or bytes, not {type(source).__name__}")
        handle = ctypes.c_void_p()
        status = _lib.glimpse_video_open(address, size, label, ctypes.byref(options), ctypes.byref(handle))
        if status:
            self.close()
        _check(status)
        self._handle = handle.value

    @property
    def whole(self):
        """Whether the file reads to its end with the frames its container lists (False: damaged or cut
        short)."""
        if not self._handle:
            raise ValueError("glimpse.Video: closed")
        return bool(_lib.glimpse_video_whole(self._handle))

    def __iter__(self):
        return self

    def __next__(self):
        if not self._handle:
            raise StopIteration
        frame, seconds = ctypes.c_void_p(), ctypes.c_double()
        _check(_lib.glimpse_video_next(self._handle, ctypes.byref(frame), ctypes.byref(seconds)))
        if not frame.value:
            raise StopIteration
        return seconds.value, Image._adopt(frame.value)

    def close(self):
        if getattr(self, "_handle", None):
            _lib.glimpse_video_close(self._handle)
            self._handle = None
        self._view = None  # (the mapping cannot close while a view of it exists)
        if getattr(self, "_map", None) is not None:
            self._map.close()
            self._map = None
        self._data = None


def _as_list(items, single_types):
    """One item alone is a list of one; anything else is iterated."""
    if isinstance(items, single_types) or (isinstance(items, np.ndarray) and items.ndim == 3):
        return [items]
    return list(items)


_IMAGE_SOURCES = (str, os.PathLike, bytes, bytearray, memoryview, Image)


def _batches(sources, batch_size):
    """Decodes the sources batch_size at a time: yields (first index, list of Image) with the Images it
    made freed after each batch. A source that fails raises its GlimpseError naming it."""
    for first in range(0, len(sources), batch_size):
        made, batch = [], []
        try:
            for source in sources[first:first + batch_size]:
                if isinstance(source, Image):
                    batch.append(source)
                else:
                    image = Image(source)
                    made.append(image)
                    batch.append(image)
            yield first, batch
        finally:
            for image in made:
                image.close()


# ------------------------------------------------------------------ model

Caption = namedtuple("Caption", "text ids")
Caption.__doc__ = """A caption or an answer: text as transformers' decode(ids, skip_special_tokens=True), ids the
whole sequence as transformers' generate returns it (BLIP, ViT-GPT2: start token, prompt, generated tokens;
BLIP-2: start token 2 and the generated tokens, not the prompt)."""


_ImagePart = namedtuple("_ImagePart", "source")  # a picture given as {"type": "image", "image": a path string}

ChatReply = namedtuple("ChatReply", "text ids prompt prompt_ids prompt_positions cached_positions ended")
ChatReply.__doc__ = """The assistant's message from Model.chat: text (decoded, skipping special tokens), ids (the generated
tokens, the end token included when it stopped on it), prompt (the conversation as the model read it: LLaVA's chat
template, BLIP-2's chained questions) and prompt_ids, prompt_positions (positions the language model read, a
picture's rows counted), cached_positions (how many of them came from the cache of the previous call) and ended
(it stopped on the end token rather than at max_tokens)."""


class Model(_Handle):
    """A model loaded once from a Hugging Face snapshot folder (or a hub id in the local cache):
    CLIP and SigLIP embed, score and rank; BLIP captioning and ViT-GPT2 caption; BLIP-2 captions and
    answers questions (ask); BLIP retrieval ranks (ITM or ITC).
    One Model may be shared by any number of threads: each thread gets its own glimpse context (scratch
    memory and a pool of `threads` worker threads, 0 = all cores) the first time it calls."""

    def __init__(self, path, threads=0, precision="float32", load_vision=True, load_text=True):
        self._handle = None
        threads = _whole_number("threads", threads, 0)  # (checked before the model loads)
        if precision not in _c.PRECISIONS:
            raise ValueError(f"glimpse.Model: precision is float32 or int8, not {precision!r}")
        params = _lib.glimpse_load_default_params()
        params.precision = _c.PRECISIONS[precision]
        params.load_vision, params.load_text = bool(load_vision), bool(load_text)
        handle = ctypes.c_void_p()
        _check(_lib.glimpse_model_load(_encode_path(path), ctypes.byref(params), ctypes.byref(handle)))
        self._handle = handle.value
        self.threads = threads
        self.precision = precision
        self._local = threading.local()
        self._contexts = []
        self._lock = threading.Lock()
        info = _c.ModelInfo()
        _check(_lib.glimpse_model_get_info(self._handle, ctypes.byref(info)))
        self.kind = _c.MODEL_KINDS.get(info.kind, str(info.kind))
        self.captions = bool(_lib.glimpse_model_kind_can(info.kind, _c.CAPABILITY_CAPTION))
        self.answers = bool(_lib.glimpse_model_kind_can(info.kind, _c.CAPABILITY_ASK))
        self.architecture = info.architecture.decode()
        self.path = info.path.decode()
        self.embedding_dim = int(_lib.glimpse_model_embedding_dim(self._handle))
        self.logit_scale = float(info.logit_scale)
        self.logit_bias = float(info.logit_bias)
        self.image_size = int(info.image_size)
        self.weight_dtype = info.weight_dtype.decode() if info.weight_dtype else ""
        identity = ctypes.create_string_buffer(128)
        _check(_lib.glimpse_model_identity(self._handle, identity, len(identity)))
        self.identity = identity.value.decode()  # what a search index records of the model

    def __repr__(self):
        return f"glimpse.Model({self.path!r}, kind={self.kind!r}, precision={self.precision!r})"

    def _context(self):
        """This thread's context (made on first use, freed with the model)."""
        if self._handle is None:
            raise ValueError("glimpse.Model: the model is closed")
        ctx = getattr(self._local, "ctx", None)
        if ctx is None:
            params = _lib.glimpse_context_default_params()
            params.threads = self.threads
            handle = ctypes.c_void_p()
            _check(_lib.glimpse_context_create(self._handle, ctypes.byref(params), ctypes.byref(handle)))
            ctx = self._local.ctx = handle.value
            with self._lock:
                self._contexts.append(ctx)
        return ctx

    def close(self):
        """Frees the model and every thread's context; no call may be running."""
        with getattr(self, "_lock", threading.Lock()):
            for ctx in getattr(self, "_contexts", []):
                _lib.glimpse_context_free(ctx)
            self._contexts = []
        if self._handle:
            _lib.glimpse_model_free(self._handle)
            self._handle = None

    # -------------------------------------------------------- embeddings

    def embed_images(self, images, batch_size=8):
        """Embeddings of images (a list of paths, encoded bytes, numpy H x W x 3 uint8 arrays or Images;
        one alone is a list of one): float32 array [n, embedding_dim], projected and L2-normalised as
        transformers' image_embeds. Embedded batch_size at a time (8, as `glimpse embed` does)."""
        sources = _as_list(images, _IMAGE_SOURCES)
        out = np.empty((len(sources), self.embedding_dim), dtype=np.float32)
        if not sources:
            return out
        ctx = self._context()
        for first, batch in _batches(sources, batch_size):
            _check(_lib.glimpse_embed_images(ctx, _handles(batch), len(batch), _floats(out[first:])))
        return out

    def embed_texts(self, texts):
        """Embeddings of texts (a list of str, or one str): float32 [n, embedding_dim], as text_embeds."""
        encoded, array = _texts(texts)
        out = np.empty((len(encoded), self.embedding_dim), dtype=np.float32)
        if encoded:
            _check(_lib.glimpse_embed_texts(self._context(), array, len(encoded), _floats(out)))
        return out

    def score(self, image_embeddings, text_embeddings):
        """logits[i, t] = logit_scale × cosine + logit_bias of embeddings from embed_images/embed_texts,
        as CLIP's and SigLIP's logits_per_image."""
        images = np.ascontiguousarray(image_embeddings, dtype=np.float32).reshape(-1, self.embedding_dim)
        texts = np.ascontiguousarray(text_embeddings, dtype=np.float32).reshape(-1, self.embedding_dim)
        logits = np.empty((len(images), len(texts)), dtype=np.float32)
        _check(_lib.glimpse_score(self._handle, _floats(images), len(images), _floats(texts), len(texts),
                                  _floats(logits)))
        return logits

    def rank(self, images, texts, mode="itm"):
        """Scores every image against every text: float32 [images, texts], higher is better. CLIP and
        SigLIP: the logit (score()); BLIP retrieval: the ITM match probability, or with mode="itc" the ITC
        cosine. np.argsort(-scores[:, t]) orders the images for text t."""
        if self.embedding_dim:  # CLIP-style towers embed into one space
            return self.score(self.embed_images(images), self.embed_texts(texts))
        if mode not in _c.MATCH_MODES:
            raise ValueError(f"glimpse.Model.rank: mode is itm or itc, not {mode!r}")
        sources = _as_list(images, _IMAGE_SOURCES)
        encoded, text_array = _texts(texts)
        scores = np.empty((len(sources), len(encoded)), dtype=np.float32)
        ctx = self._context()
        for first, batch in _batches(sources, 8):
            _check(_lib.glimpse_match(ctx, _handles(batch), len(batch), text_array, len(encoded),
                                      _c.MATCH_MODES[mode], _floats(scores[first:])))
        return scores

    def tokenize(self, text):
        """Token ids of text as the model's tokenizer gives them (start and end tokens, truncated)."""
        count = ctypes.c_size_t()
        capacity = 1024
        ids = (ctypes.c_int32 * capacity)()
        _check(_lib.glimpse_tokenize(self._handle, _c_text(text), ids, capacity, ctypes.byref(count)))
        return list(ids[:count.value])

    # -------------------------------------------------------- captions

    def caption(self, images, prompt=None, max_tokens=None, min_tokens=None, beams=None, length_penalty=None,
                repetition_penalty=None, sample=False, temperature=1.0, top_k=50, top_p=1.0, seed=0,
                on_token=None):
        """Captions images with a captioning model (BLIP, ViT-GPT2, BLIP-2): a list of Caption(text, ids).
        Settings left at None are the model's own (generation_config.json, else the family's: BLIP 3 beams,
        5 to 20 new tokens; BLIP-2 its text_config's: greedy, 19 new tokens). on_token(image, id,
        text_so_far) is called as each token is chosen (greedy and sampling: token by token; beams: the
        winner's tokens once known); image is the index in images; returning True cancels the call
        (glimpse.CancelledError)."""
        params = self._caption_params(prompt, max_tokens, min_tokens, beams, length_penalty, repetition_penalty,
                                      sample, temperature, top_k, top_p, seed)
        return self._generate(images, params, on_token)

    def ask(self, images, question=None, prompt=None, max_tokens=None, min_tokens=None, beams=None,
            length_penalty=None, repetition_penalty=None, sample=False, temperature=1.0, top_k=50, top_p=1.0,
            seed=0, on_token=None):
        """Answers a question about each image with a BLIP-2 or LLaVA model (glimpse ask): a list of
        Caption(text, ids), text the answer. Give question (put in BLIP-2's prompt "Question: QUESTION
        Answer:", as its paper and model card do; in LLaVA's chat template after the picture) or prompt (a free prompt, given to the language model as written), not
        both. The other settings and on_token are caption()'s. text is transformers' decode(ids,
        skip_special_tokens=True), which may begin with a space: answer.text.strip() is what BLIP-2's
        model card and `glimpse ask` print. ids are the start token 2 and the generated tokens, as BLIP-2's
        generate returns them (not the prompt). A question to another kind of model raises GlimpseError
        (WRONG_MODEL); a prompt is taken by any captioning model, as `glimpse ask --prompt` takes it."""
        if (question is None) == (prompt is None):
            raise ValueError("glimpse.Model.ask: give a question or a prompt (one of them)")
        params = self._caption_params(prompt, max_tokens, min_tokens, beams, length_penalty, repetition_penalty,
                                      sample, temperature, top_k, top_p, seed)
        return self._generate(images, params, on_token, question)

    def ask_together(self, images, question=None, prompt=None, max_tokens=None, beams=None, on_token=None):
        """One answer about all the images together (glimpse ask --together; LLaVA): a Caption(text, ids), ids the
        generated tokens. question goes after every picture in the checkpoint's chat template; prompt is taken
        verbatim, one "<image>" per picture in order. images may be empty for a question about no picture."""
        if (question is None) == (prompt is None):
            raise ValueError("glimpse.Model.ask_together: give a question or a prompt (one of them)")
        params = self._caption_params(prompt, max_tokens, None, beams, None, None, False, 1.0, 50, 1.0, 0)
        guard, _ = _stream_tokens(params, on_token)
        sources = _as_list(images, _IMAGE_SOURCES) if images else []
        out = _c.Caption()
        batches = _batches(sources, len(sources)) if sources else iter([(0, [])])
        for _, batch in batches:
            status = _lib.glimpse_ask_together(self._context(), _handles(batch) if batch else None, len(batch),
                                               None if question is None else _c_text(question),
                                               ctypes.byref(params), ctypes.byref(out))
            try:
                guard.reraise()
                _check(status)
                return Caption(ctypes.string_at(out.text).decode(errors="replace"), list(out.ids[:out.id_count]))
            finally:
                _lib.glimpse_caption_free(ctypes.byref(out))

    def chat(self, messages, max_tokens=None, beams=None, sample=False, temperature=1.0, top_k=50, top_p=1.0,
             seed=0, on_token=None):
        """The assistant's next message in a conversation about pictures (LLaVA, BLIP-2; glimpse chat): a
        ChatReply. messages is a list of {"role": "system" | "user" | "assistant", "content": ...}, content a
        string or a list of parts, each a string (text), a picture (a pathlib.Path, bytes, a glimpse.Image, an
        array) or {"type": "text", "text": ...} / {"type": "image", "image": picture or path string}; the last
        message is the user's. The model keeps what it read in this thread's context: a call whose conversation
        starts as the previous one did (its reply and a new question appended) reads only what is new
        (reply.cached_positions), and answers as a fresh call does. The settings and on_token(0, id,
        text_so_far) are caption()'s; left at None, the model's own."""
        params = self._caption_params(None, max_tokens, None, beams, None, None, sample, temperature, top_k, top_p,
                                      seed)
        guard, _ = _stream_tokens(params, on_token)
        made, keep = [], []
        try:
            array = (_c.ChatMessage * len(messages))()
            for i, message in enumerate(messages):
                content = message["content"]
                content = [content] if isinstance(content, str) or content is None else list(content)
                parts = (_c.ChatPart * max(1, len(content)))()
                for j, part in enumerate(content):
                    if isinstance(part, dict):
                        if part.get("type") not in ("text", "image"):
                            raise ValueError(f"glimpse.Model.chat: a part's type is text or image, not "
                                             f"{part.get('type')!r}")
                        part = str(part["text"]) if part["type"] == "text" else _ImagePart(part["image"])
                    if isinstance(part, str) or part is None:
                        parts[j].text = _c_text(part or "")
                        continue
                    part = part.source if isinstance(part, _ImagePart) else part
                    image = part if isinstance(part, Image) else Image(part)
                    if image is not part:
                        made.append(image)
                    parts[j].image = image._handle
                keep.append(parts)
                array[i].role = _c_text(message["role"])
                array[i].parts = parts
                array[i].part_count = len(content)
            out = _c.Caption()
            status = _lib.glimpse_chat(self._context(), array, len(messages), ctypes.byref(params), ctypes.byref(out))
            try:
                guard.reraise()
                _check(status)
                return ChatReply(ctypes.string_at(out.text).decode(errors="replace"), list(out.ids[:out.id_count]),
                                 ctypes.string_at(out.prompt).decode(errors="replace") if out.prompt else "",
                                 list(out.prompt_ids[:out.prompt_id_count]), out.prompt_positions,
                                 out.cached_positions, bool(out.ended))
            finally:
                _lib.glimpse_caption_free(ctypes.byref(out))
        finally:
            for image in made:
                image.close()

    # -------------------------------------------------------- tasks (Florence-2)

    def task(self, images, task, text=None, region=None, max_tokens=None, beams=None, on_token=None):
        """Runs a Florence-2 task on each image (glimpse task): a list of TaskResult(task, ids, text, answer,
        regions, result). task is named exactly as the model card names it ("<CAPTION>", "<OD>", "<OCR>",
        "<OCR_WITH_REGION>", ...; `glimpse task --help` lists them). text: the phrase the phrase tasks take,
        or a region as four "<loc_N>" tokens; region: (x0, y0, x1, y1) in each picture's pixels instead,
        quantised as Florence-2's processor does. ids are as generate returns them, text decoded as the model
        card decodes it (special tokens kept), answer the text tasks' answer (else None), regions a list of
        Region(label, shape, instance, coords, score) with shape "box", "quad" or "polygon" and coords in the
        picture's pixels, and result the processor's post_process_generation result as a dict. Settings left
        at None are the checkpoint's own (3 beams, 1,024 new tokens for the real checkpoints)."""
        if text is not None and region is not None:
            raise ValueError("glimpse.Model.task: give text or region, not both")
        params = self._caption_params(None, max_tokens, None, beams, None, None, False, 1.0, 50, 1.0, 0)
        guard, first_of_batch = _stream_tokens(params, on_token)
        sources = _as_list(images, _IMAGE_SOURCES)
        results = []
        for first, batch in _batches(sources, 1 if region is not None else 8):
            first_of_batch[0] = first
            inputs = [None if text is None else _c_text(text)] * len(batch)
            if region is not None:
                inputs = [self._region_tokens(image, region) for image in batch]
            out = (_c.TaskResult * len(batch))()
            try:
                status = _lib.glimpse_run_task(self._context(), _handles(batch), len(batch), _c_text(task),
                                               inputs[0], ctypes.byref(params), out)
                guard.reraise()
                _check(status)
                results.extend(_task_result(result) for result in out)
            finally:
                for result in out:
                    _lib.glimpse_task_result_free(ctypes.byref(result))
        return results

    @staticmethod
    def _region_tokens(image, region):
        """The four <loc_N> tokens of region (x0, y0, x1, y1 in image's pixels), as glimpse_task_region makes
        them."""
        values = [float(v) for v in region]
        if len(values) != 4:
            raise ValueError("glimpse.Model.task: region is x0, y0, x1, y1")
        out = ctypes.create_string_buffer(64)
        _check(_lib.glimpse_task_region(image.width, image.height, (ctypes.c_float * 4)(*values), out, 64))
        return out.value

    def ocr(self, images, regions=False, **settings):
        """The text in each picture (<OCR>), or each line with its four corners (regions=True:
        <OCR_WITH_REGION>): task()'s results."""
        return self.task(images, "<OCR_WITH_REGION>" if regions else "<OCR>", **settings)

    def detect(self, images, phrase=None, open_vocabulary=False, dense=False, proposals=False, **settings):
        """Objects in each picture with boxes and labels (<OD>); phrase: the boxes of what the phrase names
        (<CAPTION_TO_PHRASE_GROUNDING>, or <OPEN_VOCABULARY_DETECTION> with open_vocabulary); dense: each region
        with a short description; proposals: unlabelled regions likely to hold an object."""
        if phrase is None and open_vocabulary:
            raise ValueError("glimpse.Model.detect: open_vocabulary needs a phrase")
        if phrase is not None and (dense or proposals):
            raise ValueError("glimpse.Model.detect: dense and proposals take no phrase")
        if dense and proposals:
            raise ValueError("glimpse.Model.detect: dense or proposals, not both")
        if phrase is not None:
            task = "<OPEN_VOCABULARY_DETECTION>" if open_vocabulary else "<CAPTION_TO_PHRASE_GROUNDING>"
            return self.task(images, task, text=phrase, **settings)
        return self.task(images, "<DENSE_REGION_CAPTION>" if dense else "<REGION_PROPOSAL>" if proposals else "<OD>",
                         **settings)

    def segment(self, images, phrase=None, region=None, **settings):
        """Polygons outlining what phrase names (<REFERRING_EXPRESSION_SEGMENTATION>) or the object in region
        (x0, y0, x1, y1 in pixels: <REGION_TO_SEGMENTATION>); one of the two."""
        if (phrase is None) == (region is None):
            raise ValueError("glimpse.Model.segment: give a phrase or a region (one of them)")
        if phrase is not None:
            return self.task(images, "<REFERRING_EXPRESSION_SEGMENTATION>", text=phrase, **settings)
        return self.task(images, "<REGION_TO_SEGMENTATION>", region=region, **settings)

    def describe(self, images, region, category=False, read=False, **settings):
        """A region (x0, y0, x1, y1 in pixels) of each picture in words (<REGION_TO_DESCRIPTION>), its category
        alone (category: <REGION_TO_CATEGORY>) or the text in it (read: <REGION_TO_OCR>)."""
        if category and read:
            raise ValueError("glimpse.Model.describe: category or read, not both")
        task = "<REGION_TO_CATEGORY>" if category else "<REGION_TO_OCR>" if read else "<REGION_TO_DESCRIPTION>"
        return self.task(images, task, region=region, **settings)

    @staticmethod
    def _caption_params(prompt, max_tokens, min_tokens, beams, length_penalty, repetition_penalty, sample,
                        temperature, top_k, top_p, seed):
        """glimpse_caption_params from caption()'s and ask()'s keywords (None: left to the model). The
        prompt's bytes are kept on the structure (ctypes holds them while it lives)."""
        params = _lib.glimpse_caption_default_params()
        params.prompt = _c_text(prompt) if prompt is not None else None
        for name, value, minimum in (("max_tokens", max_tokens, 1), ("min_tokens", min_tokens, 0),
                                     ("beams", beams, 1)):
            if value is not None:
                setattr(params, name, _whole_number(name, value, minimum))
        for name, value in (("length_penalty", length_penalty), ("repetition_penalty", repetition_penalty)):
            if value is not None:
                setattr(params, name, float(value))
        params.sample, params.temperature = bool(sample), float(temperature)
        params.top_k, params.top_p = _whole_number("top_k", top_k, 0), float(top_p)
        params.seed = _whole_number("seed", seed, 0)
        return params

    def _generate(self, images, params, on_token, question=None):
        """Captions the images 8 at a time with params (glimpse_caption_images), or answers question about
        them (glimpse_ask_images), with on_token wired into params; a list of Caption."""
        question_bytes = None if question is None else _c_text(question)
        sources = _as_list(images, _IMAGE_SOURCES)
        guard, first_of_batch = _stream_tokens(params, on_token)
        captions = []
        ctx = self._context()
        for first, batch in _batches(sources, 8):
            first_of_batch[0] = first
            out = (_c.Caption * len(batch))()
            if question_bytes is None:
                status = _lib.glimpse_caption_images(ctx, _handles(batch), len(batch), ctypes.byref(params), out)
            else:
                status = _lib.glimpse_ask_images(ctx, _handles(batch), len(batch), question_bytes,
                                                 ctypes.byref(params), out)
            try:
                guard.reraise()
                _check(status)
                for caption in out:
                    captions.append(Caption(ctypes.string_at(caption.text).decode(errors="replace"),
                                            list(caption.ids[:caption.id_count])))
            finally:
                for caption in out:
                    _lib.glimpse_caption_free(ctypes.byref(caption))
        return captions

    def embed_query(self, query):
        """The embedding of a combined query ("2:sunset + beach - people", "@photo.jpg + snow"), as
        `glimpse search` embeds it: float32 [embedding_dim]."""
        out = np.empty(self.embedding_dim, dtype=np.float32)
        _check(_lib.glimpse_embed_query(self._context(), _c_text(query), _floats(out)))
        return out

    # -------------------------------------------------------- explanations

    def explain(self, image, text=None, layer=-1, head=-1, occlusion=True, raw=False, question=None,
                raw_vision=False):
        """Where the model looked, as maps over its grid of image patches (glimpse explain; the conventions
        of include/glimpse.h's explanation section): a captioning model (BLIP, ViT-GPT2, BLIP-2, LLaVA,
        Florence-2) captions image and maps each word of its caption (no text); BLIP-2 and LLaVA answer
        question instead; BLIP-2 maps the
        answer's words, each word's map built through the query tokens (ExplainMap.queries: its weight on
        each), with a last "queries" map; BLIP retrieval maps each word of text and the whole text, with
        the match probability; CLIP and SigLIP give the logit (with a text), the attention rollout, the
        occlusion map (occlusion=True and a text; one tower pass per patch) and SigLIP's attention-pooling
        map. layer and head pick one (-1: all averaged); raw=True keeps every layer's and head's
        probabilities, raw_vision=True with it a captioner's vision tower's too. An Explanation."""
        if self.captions and text is not None:
            raise ValueError("glimpse.Model.explain: a captioning model explains its own caption: give no text")
        if question is not None and not self.answers:
            raise ValueError("glimpse.Model.explain: this model does not answer questions (BLIP-2 and LLaVA do)")
        if self.kind == "blip_retrieval" and text is None:
            raise ValueError("glimpse.Model.explain: a BLIP retrieval model explains a match: give the text")
        picture = image if isinstance(image, Image) else Image(image)
        try:
            params = _lib.glimpse_explain_default_params()
            params.layer, params.head = int(layer), int(head)
            params.occlusion, params.want_raw = bool(occlusion), bool(raw)
            params.want_vision = bool(raw_vision)
            out = _c.ExplanationP()
            ctx = self._context()
            if question is not None:
                status = _lib.glimpse_explain_answer(ctx, picture._handle, _c_text(question), None,
                                                     ctypes.byref(params), ctypes.byref(out))
            elif self.captions:
                status = _lib.glimpse_explain_caption(ctx, picture._handle, None, ctypes.byref(params),
                                                      ctypes.byref(out))
            else:
                explain = _lib.glimpse_explain_match if self.kind == "blip_retrieval" else _lib.glimpse_explain_clip
                status = explain(ctx, picture._handle, None if text is None else _c_text(text),
                                 ctypes.byref(params), ctypes.byref(out))
            _check(status)
            return Explanation(out, self.kind)
        finally:
            if picture is not image:
                picture.close()


# ------------------------------------------------------------------ explanation

def _stream_tokens(params, on_token):
    """Wires on_token(image, id, text_so_far) into params: the guard that keeps its exception and a one-item list
    the caller sets to the index of each batch's first image (the library numbers images within a call)."""
    guard, first_of_batch = _CallbackGuard(), [0]
    if on_token is not None:
        def token(user, image, token_id, text):
            return guard.run(on_token, first_of_batch[0] + image, token_id, text.decode(errors="replace"))
        params.on_token = _c.TokenCallback(token)
    return guard, first_of_batch


TaskResult = namedtuple("TaskResult", "task ids text answer regions result")
Region = namedtuple("Region", "label shape instance coords score")
_REGION_SHAPES = ("box", "quad", "polygon")


def _task_result(result):
    """A TaskResult from the library's glimpse_task_result (copied: the caller frees the original)."""
    import json
    regions = []
    for r in result.regions[:result.region_count]:
        score = float(r.score)
        regions.append(Region(r.label.decode(errors="replace"), _REGION_SHAPES[r.shape], r.instance,
                              [float(c) for c in r.coords[:r.coord_count]], None if score != score else score))
    text = ctypes.string_at(result.text).decode(errors="replace") if result.text else ""
    answer = ctypes.string_at(result.answer).decode(errors="replace") if result.answer else None
    parsed = json.loads(ctypes.string_at(result.json).decode(errors="replace")) if result.json else None
    return TaskResult(result.task.decode(), list(result.ids[:result.id_count]), text, answer, regions, parsed)


ExplainMap = namedtuple("ExplainMap", "kind label tokens grid queries", defaults=(None,))
ExplainMap.__doc__ = """One map of an Explanation: kind ("cross_attention" for a word or the whole text "[text]",
"rollout", "occlusion", "attention_pool", "queries"), label (the word or the kind), tokens (the word's token
ids; [] for the others), grid (float32 [grid rows, grid columns], row 0 at the top; attention maps sum to 1)
and queries (BLIP-2's words: float32 [query tokens], the word's weight on each, summing to 1; else None)."""


class Explanation(_Handle):
    """What Model.explain found: text (the caption or the text explained, None without one), ids (the token
    ids the maps index), score (ITM: match probability; CLIP, SigLIP: logit; None for captions and without a
    text), grid_size (rows, columns), maps [ExplainMap] (words in text order, then the whole-image/text
    maps), labels, region (left, top, right, bottom of the picture that the grid covers, in the picture's
    pixels), image_size (width, height), raw {name: float32 array} with raw=True. Arrays are copies: they
    outlive the Explanation. png(image) renders the contact sheet from the library's own copy."""

    def __init__(self, pointer, kind):
        self._handle = pointer
        e = pointer.contents
        self.kind = kind
        self.text = ctypes.string_at(e.text).decode(errors="replace") if e.text else None
        self.ids = list(e.ids[:e.id_count]) if e.ids else []
        self.score = None if e.score != e.score else float(e.score)
        self.grid_size = (int(e.grid_height), int(e.grid_width))
        self.image_size = (int(e.image_width), int(e.image_height))
        self.region = tuple(float(v) for v in e.region)
        cells = e.grid_height * e.grid_width
        self.maps = []
        for m in range(e.map_count):
            item = e.maps[m]
            grid = np.ctypeslib.as_array(item.grid, shape=(cells,)).reshape(self.grid_size).copy()
            tokens = self.ids[item.first_token:item.first_token + item.token_count]
            queries = (np.ctypeslib.as_array(item.queries, shape=(item.query_count,)).copy()
                       if item.query_count else None)
            self.maps.append(ExplainMap(_c.EXPLAIN_MAP_KINDS.get(item.kind, str(item.kind)),
                                        item.label.decode(errors="replace"), tokens, grid, queries))
        self.labels = [item.label for item in self.maps]
        self.raw = {}
        for r in range(e.raw_count):
            tensor = e.raw[r]
            shape = tuple(tensor.shape[:tensor.rank])
            size = int(np.prod(shape)) if shape else 1
            self.raw[tensor.name.decode()] = np.ctypeslib.as_array(tensor.data, shape=(size,)).reshape(shape).copy()

    @property
    def words(self):
        """The maps of single words (a caption's or a text's), without the whole-text and image maps."""
        return [m for m in self.maps if m.kind == "cross_attention" and m.label != "[text]" and m.tokens]

    def png(self, image, panel=256, map=None, font=None):
        """PNG bytes over image (the picture explained: a path, bytes, numpy array or Image): the contact
        sheet (the picture, then a panel per map, labelled), or with map=N that map's panel alone. Panels
        are panel pixels on their longest side; labels in font (a TrueType file; None: DejaVu Sans)."""
        if not self._handle:
            raise ValueError("glimpse.Explanation: closed")
        picture = image if isinstance(image, Image) else Image(image)
        data, size = ctypes.c_void_p(), ctypes.c_size_t()
        try:
            _check(_lib.glimpse_explain_render_png(self._handle, picture._handle,
                                                   _c.EXPLAIN_SHEET if map is None else int(map), int(panel),
                                                   None if font is None else _encode_path(font),
                                                   ctypes.byref(data), ctypes.byref(size)))
            return ctypes.string_at(data, size.value)
        finally:
            _c.libc.free(data)
            if picture is not image:
                picture.close()

    def close(self):
        if self._handle:
            _lib.glimpse_explanation_free(self._handle)
            self._handle = None


# ------------------------------------------------------------------ index

IndexSummary = namedtuple("IndexSummary", "added updated moved removed unchanged failed roots_failed read failures "
                                          "root_failures")
IndexSummary.__doc__ = """What Index.update did: counts (read: pictures whose words were read), then failures [(path, reason)] of files skipped and
root_failures [(path, reason)] of paths given (or folders under them) that were missing or unreadable."""


def _is_faiss_folder(path):
    """Whether path is an index folder of python -m glimpse.faiss build (index.faiss and params.json in it)."""
    try:
        return os.path.isdir(path) and all(os.path.isfile(os.path.join(path, name))
                                           for name in ("index.faiss", "params.json"))
    except TypeError:
        return False


class Index(_Handle):
    """A glimpse search index (an SQLite file of paths, content hashes and embeddings). With a model, the
    index is created if needed and must have been built with that model; without one it must exist and
    is opened read-only, for searching (a text query then loads the index's own model, text tower only).
    One Index per thread (SQLite handles other processes).

    A FAISS index folder (python -m glimpse.faiss build) opens as glimpse.faiss.FaissIndex instead, as
    glimpse search --faiss searches it: read-only, with the same search(query, k, with_times), len() and
    `with`; its candidates re-scored with the exact vectors. Needs Debian's python3-faiss."""

    def __new__(cls, path=None, model=None):
        if cls is Index and path is not None and _is_faiss_folder(path):
            from .faiss import FaissIndex
            return FaissIndex(os.fspath(path), model)
        return super().__new__(cls)

    def __init__(self, path, model=None):
        self._handle = None
        handle = ctypes.c_void_p()
        _check(_lib.glimpse_index_open(_encode_path(path), model._handle if model else None, ctypes.byref(handle)))
        self._handle = handle.value
        self.path = os.fspath(path)
        self.model = model

    @property
    def model_path(self):
        return _lib.glimpse_index_model_path(self._handle).decode()

    def __len__(self):
        return int(_lib.glimpse_index_count(self._handle))

    def close(self):
        if self._handle:
            _lib.glimpse_index_free(self._handle)
            self._handle = None

    def update(self, roots, progress=None, max_pixels=0, videos=False, every=None, scenes=None):
        """Brings the index up to date with files and folders (walked recursively): new and changed
        pictures embedded, moved ones recognised by content, vanished ones forgotten. progress(done,
        total) is called after each batch; returning True stops (what was committed stays;
        glimpse.CancelledError). videos=True takes videos too, as glimpse index does: each sampled as
        Video(every=, scenes=) samples it (an index keeps one sampling). Returns an IndexSummary."""
        if self.model is None:
            raise ValueError("glimpse.Index.update: open the index with a model to update it")
        paths = [_encode_path(root) for root in _as_list(roots, (str, os.PathLike))]
        array = (ctypes.c_char_p * len(paths))(*paths)
        frames = None
        if videos:
            frames = _lib.glimpse_video_frames_new(ctypes.byref(_video_options(every, scenes, max_pixels)))
            if not frames:
                raise MemoryError("glimpse.Index.update: out of memory")
        try:
            return self._change(lambda params, summary: _lib.glimpse_index_update(
                self._handle, self.model._context(), array, len(paths), params, summary), progress, max_pixels,
                frames)
        finally:
            if frames:
                _lib.glimpse_video_frames_free(frames)

    def import_embeddings(self, folder, progress=None):
        """Merges the shards glimpse.dask embed wrote to folder without embedding again (glimpse index
        --import): their model identity and precision must be the index's. A shard absent, partial or
        damaged is skipped whole (in failures, counted in roots_failed); a picture whose file changed
        since it was embedded is left out (failures, failed). progress(done, total) counts shards.
        Returns an IndexSummary."""
        if self.model is None:
            raise ValueError("glimpse.Index.import_embeddings: open the index with a model to change it")
        return self._change(lambda params, summary: _lib.glimpse_index_import(
            self._handle, _encode_path(folder), params, summary), progress)

    def _change(self, call, progress, max_pixels=0, frames=None):
        """Runs call(params, summary) with callbacks that collect failures; an IndexSummary."""
        failures, root_failures = [], []
        guard = _CallbackGuard()
        params = _c.IndexParams()
        params.max_pixels = max_pixels
        params.frames = frames
        if progress is not None:
            params.on_progress = _c.ProgressCallback(lambda user, done, total: guard.run(progress, done, total))
        params.on_failure = _c.FailureCallback(
            lambda user, path, reason: failures.append((os.fsdecode(path), reason.decode(errors="replace"))))
        params.on_root_failure = _c.RootFailureCallback(
            lambda user, path, status, reason: root_failures.append((os.fsdecode(path),
                                                                     reason.decode(errors="replace"))))
        summary = _c.IndexSummary()
        status = call(ctypes.byref(params), ctypes.byref(summary))
        guard.reraise()
        _check(status)
        counts = [getattr(summary, name) for name, _ in _c.IndexSummary._fields_]
        return IndexSummary(*counts, failures, root_failures)

    def stats(self):
        """What the index holds, as `glimpse index --stats`: a dict of images (files; a video counts once),
        failed, dim, precision, model_path, model_identity, file_bytes, videos, frames (stored for the videos),
        video_sampling (None before the index held videos) and fast_decode."""
        stats = _c.IndexStats()
        _check(_lib.glimpse_index_get_stats(self._handle, ctypes.byref(stats)))
        precisions = {value: name for name, value in _c.PRECISIONS.items()}
        return {"images": stats.images, "failed": stats.failed, "dim": stats.dim,
                "precision": precisions.get(stats.precision, str(stats.precision)),
                "model_path": os.fsdecode(stats.model_path or b""),
                "model_identity": (stats.model_identity or b"").decode(errors="replace"),
                "file_bytes": stats.file_bytes, "videos": stats.videos, "frames": stats.frames,
                "video_sampling": stats.video_sampling.decode() if stats.video_sampling else None,
                "fast_decode": bool(stats.fast_decode)}

    def remove(self, path):
        """Forgets the entry of the file at path, or every entry under the folder at path (which need not
        exist any more); returns how many. Needs an Index opened with its model."""
        removed = ctypes.c_size_t()
        _check(_lib.glimpse_index_remove(self._handle, _encode_path(path), ctypes.byref(removed)))
        return removed.value

    def prune(self):
        """Forgets every entry whose file no longer exists; returns how many. Needs the model."""
        removed = ctypes.c_size_t()
        _check(_lib.glimpse_index_prune(self._handle, ctypes.byref(removed)))
        return removed.value

    def embedding(self, path):
        """The embedding stored for the file at path (float32 [dim]), checked against its checksum: its
        neighbours are search(index.embedding(path)), as `glimpse search --like`. NotFoundError if the
        index has no entry for it."""
        out = np.empty(int(_lib.glimpse_index_embedding_dim(self._handle)), dtype=np.float32)
        _check(_lib.glimpse_index_embedding(self._handle, _encode_path(path), _floats(out)))
        return out

    def duplicates(self, min_cosine=_c.INDEX_DUPLICATE_COSINE):
        """Groups of near-identical pictures (cosine at least min_cosine, joined transitively), as
        `glimpse duplicates`: a list of [(path, cosine to the group's first)], groups of two or more."""
        groups = []

        def group(user, paths, similarity, count):
            groups.append([(os.fsdecode(paths[i]), float(similarity[i])) for i in range(count)])
        found = ctypes.c_size_t()
        _check(_lib.glimpse_index_duplicates(self._handle, float(min_cosine), _c.GroupCallback(group), None,
                                             ctypes.byref(found)))
        return groups

    def verify(self):
        """The full check of the index file; raises GlimpseError (BAD_FORMAT) on damage."""
        checksummed = ctypes.c_bool()
        _check(_lib.glimpse_index_verify(self._handle, ctypes.byref(checksummed)))
        return bool(checksummed.value)

    def _query_model(self, query):
        if self.model is None:
            needs_images = _lib.glimpse_query_needs_images(_c_text(query))
            self.model = Model(self.model_path, load_vision=needs_images)
        return self.model

    def search(self, query=None, k=10, with_times=False, text_in=None, object=None):
        """The k stored pictures closest to query, best first, as [(path, score)]: query is a text or a
        combined query as `glimpse search` takes it ("sunset + beach - people", "@photo.jpg"), or an
        embedding (float32 [embedding_dim], L2-normalised). score = logit_scale × cosine + logit_bias.
        with_times: [(path, score, time)], time a video frame's seconds, None for a still picture.
        text_in (words in the picture's text) and object (an object's label) keep only the pictures whose words
        match, as `glimpse search --text-in/--object` (an index built with --ocr/--objects); without a query
        they are ranked by how well their words match (score: bm25, negated)."""
        for name, value in (("text_in", text_in), ("object", object)):
            if value is not None and not isinstance(value, str):
                raise TypeError(f"glimpse.Index.search: {name} is a string, not {type(value).__name__}")
        filtered = bool(text_in) or bool(object)
        vector = None
        if query is None:
            if not filtered:
                raise ValueError("glimpse.Index.search: give a query, text_in or object")
        elif isinstance(query, str):
            vector = self._query_model(query).embed_query(query)
        else:
            vector = np.ascontiguousarray(query, dtype=np.float32).reshape(-1)
            dim = self._query_model("").embedding_dim
            if vector.shape[0] != dim:
                raise ValueError(f"glimpse.Index.search: the index holds {dim}-dimensional embeddings, "
                                 f"the query has {vector.shape[0]}")
        if _whole_number("k", k, 0) == 0:
            return []
        results = (_c.SearchResult * k)()
        found = ctypes.c_size_t()
        if filtered:
            words = _c.SearchFilter(_c_text(text_in) if text_in else None, _c_text(object) if object else None)
            _check(_lib.glimpse_index_search_filtered(self._handle, _floats(vector) if vector is not None else None,
                                                      k, ctypes.byref(words), results, ctypes.byref(found)))
        else:
            _check(_lib.glimpse_index_search(self._handle, _floats(vector), k, results, ctypes.byref(found)))
        return [(os.fsdecode(result.path), float(result.score))
                + ((float(result.time) if result.time >= 0 else None,) if with_times else ())
                for result in results[:found.value]]

