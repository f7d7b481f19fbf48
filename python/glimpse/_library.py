"""_library.py — finds libglimpse.so.0 and declares its C API (include/glimpse.h) for ctypes.
Only the declarations live here: structures, callback types and argument types, nothing that
allocates. ctypes drops the GIL around every call into a CDLL, so glimpse's work runs in parallel."""

import ctypes
import os
from pathlib import Path

SONAME = "libglimpse.so.0"


def _candidates():
    """Where the library is looked for, in order: $GLIMPSE_LIBRARY, a build/ folder of the source
    tree this package sits in (python/glimpse -> ../../build), then the dynamic loader's own
    search (an installed libglimpse.so.0: /usr/local/lib, ldconfig's paths, $LD_LIBRARY_PATH)."""
    explicit = os.environ.get("GLIMPSE_LIBRARY")
    if explicit:
        return [explicit]
    source_build = Path(__file__).resolve().parents[2] / "build" / SONAME  # SOURCE/python/glimpse/_library.py
    return ([str(source_build)] if source_build.is_file() else []) + [SONAME]


def _load():
    tried = []
    for candidate in _candidates():
        try:
            return ctypes.CDLL(candidate)
        except OSError as error:
            tried.append(f"{candidate}: {error}")
    raise ImportError("glimpse: cannot load libglimpse (set GLIMPSE_LIBRARY to its path); tried "
                      + "; ".join(tried))


lib = _load()

c_float_p = ctypes.POINTER(ctypes.c_float)
c_int32_p = ctypes.POINTER(ctypes.c_int32)
c_size_t_p = ctypes.POINTER(ctypes.c_size_t)
c_bool_p = ctypes.POINTER(ctypes.c_bool)
status = ctypes.c_int

# status values, in glimpse_status order
STATUS_NAMES = ["OK", "INVALID_ARGUMENT", "IO", "NOT_FOUND", "BAD_FORMAT", "UNSUPPORTED", "TOO_LARGE",
                "OUT_OF_MEMORY", "WRONG_MODEL", "CANCELLED", "INTERNAL", "BUSY"]
STATUS_CANCELLED = STATUS_NAMES.index("CANCELLED")

MODEL_KINDS = {1: "clip", 2: "blip_caption", 3: "blip_retrieval", 4: "siglip", 5: "vit_gpt2", 6: "blip2"}
PRECISIONS = {"float32": 0, "int8": 1}
PIXEL_FORMAT_RGB8, PIXEL_FORMAT_RGBA8 = 1, 2
MATCH_MODES = {"itm": 0, "itc": 1}

ProgressCallback = ctypes.CFUNCTYPE(ctypes.c_bool, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_size_t)
TokenCallback = ctypes.CFUNCTYPE(ctypes.c_bool, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int32, ctypes.c_char_p)
FailureCallback = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_char_p, ctypes.c_char_p)
RootFailureCallback = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p)


class LoadParams(ctypes.Structure):
    _fields_ = [("load_vision", ctypes.c_bool), ("load_text", ctypes.c_bool), ("precision", ctypes.c_int)]


class ModelInfo(ctypes.Structure):
    _fields_ = [("kind", ctypes.c_int), ("architecture", ctypes.c_char_p), ("path", ctypes.c_char_p),
                ("image_size", ctypes.c_int), ("patch_size", ctypes.c_int),
                ("vision_hidden_size", ctypes.c_int), ("vision_layers", ctypes.c_int),
                ("vision_heads", ctypes.c_int), ("text_hidden_size", ctypes.c_int),
                ("text_layers", ctypes.c_int), ("text_heads", ctypes.c_int), ("text_max_tokens", ctypes.c_int),
                ("vocab_size", ctypes.c_int), ("embedding_dim", ctypes.c_int),
                ("vision_activation", ctypes.c_char_p), ("text_activation", ctypes.c_char_p),
                ("parameter_count", ctypes.c_size_t), ("weight_bytes", ctypes.c_size_t),
                ("weight_dtype", ctypes.c_char_p), ("logit_scale", ctypes.c_float),
                ("copied_bytes", ctypes.c_size_t), ("logit_bias", ctypes.c_float), ("precision", ctypes.c_int),
                ("preprocessor_defaults", ctypes.c_bool), ("sigmoid_scores", ctypes.c_bool),
                ("description", ctypes.c_char_p)]


class ContextParams(ctypes.Structure):
    _fields_ = [("threads", ctypes.c_int), ("on_progress", ProgressCallback), ("user", ctypes.c_void_p)]


class ImageParams(ctypes.Structure):
    _fields_ = [("max_pixels", ctypes.c_uint64), ("ignore_exif_orientation", ctypes.c_bool)]


class CaptionParams(ctypes.Structure):
    _fields_ = [("prompt", ctypes.c_char_p), ("max_tokens", ctypes.c_int), ("min_tokens", ctypes.c_int),
                ("beams", ctypes.c_int), ("length_penalty", ctypes.c_float),
                ("repetition_penalty", ctypes.c_float), ("sample", ctypes.c_bool),
                ("temperature", ctypes.c_float), ("top_k", ctypes.c_int), ("top_p", ctypes.c_float),
                ("seed", ctypes.c_uint64), ("on_token", TokenCallback), ("user", ctypes.c_void_p),
                ("batch_rows", ctypes.c_int)]


class Caption(ctypes.Structure):
    _fields_ = [("text", ctypes.c_void_p), ("ids", c_int32_p), ("id_count", ctypes.c_size_t),
                ("prompt", ctypes.c_void_p), ("prompt_ids", c_int32_p), ("prompt_id_count", ctypes.c_size_t),
                ("prompt_positions", ctypes.c_size_t), ("cached_positions", ctypes.c_size_t),
                ("ended", ctypes.c_bool)]


class ChatPart(ctypes.Structure):
    _fields_ = [("text", ctypes.c_char_p), ("image", ctypes.c_void_p)]


class ChatMessage(ctypes.Structure):
    _fields_ = [("role", ctypes.c_char_p), ("parts", ctypes.POINTER(ChatPart)), ("part_count", ctypes.c_size_t)]


class IndexSummary(ctypes.Structure):
    _fields_ = [(name, ctypes.c_size_t) for name in
                ("added", "updated", "moved", "removed", "unchanged", "failed", "roots_failed", "read")]


class IndexParams(ctypes.Structure):
    _fields_ = [("on_progress", ProgressCallback), ("on_failure", FailureCallback), ("user", ctypes.c_void_p),
                ("max_pixels", ctypes.c_uint64), ("on_root_failure", RootFailureCallback),
                ("exclude", ctypes.POINTER(ctypes.c_char_p)), ("exclude_count", ctypes.c_size_t),
                ("frames", ctypes.c_void_p), ("fast_decode", ctypes.c_bool),
                ("words", ctypes.c_void_p), ("read_text", ctypes.c_bool), ("read_objects", ctypes.c_bool)]


class IndexStats(ctypes.Structure):
    _fields_ = [("images", ctypes.c_size_t), ("failed", ctypes.c_size_t), ("dim", ctypes.c_size_t),
                ("precision", ctypes.c_int), ("model_path", ctypes.c_char_p), ("model_identity", ctypes.c_char_p),
                ("file_bytes", ctypes.c_uint64), ("videos", ctypes.c_size_t), ("frames", ctypes.c_size_t),
                ("video_sampling", ctypes.c_char_p), ("fast_decode", ctypes.c_bool)]


class VideoOptions(ctypes.Structure):
    _fields_ = [("every_seconds", ctypes.c_double), ("scene_threshold", ctypes.c_double),
                ("max_pixels", ctypes.c_uint64), ("ignore_rotation", ctypes.c_bool)]


GroupCallback = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.POINTER(ctypes.c_char_p), c_float_p, ctypes.c_size_t)


class SearchResult(ctypes.Structure):
    _fields_ = [("path", ctypes.c_char_p), ("score", ctypes.c_float), ("time", ctypes.c_double)]


def _declare(name, restype, *argtypes):
    function = getattr(lib, name)
    function.restype = restype
    function.argtypes = list(argtypes)


P = ctypes.c_void_p  # every opaque handle
PP = ctypes.POINTER(ctypes.c_void_p)
_declare("glimpse_version", ctypes.c_char_p)
_declare("glimpse_status_string", ctypes.c_char_p, status)
_declare("glimpse_last_error", ctypes.c_char_p)
_declare("glimpse_load_default_params", LoadParams)
_declare("glimpse_model_load", status, ctypes.c_char_p, ctypes.POINTER(LoadParams), PP)
_declare("glimpse_model_free", None, P)
_declare("glimpse_model_embedding_dim", ctypes.c_size_t, P)
_declare("glimpse_model_get_info", status, P, ctypes.POINTER(ModelInfo))
_declare("glimpse_model_identity", status, P, ctypes.c_char_p, ctypes.c_size_t)
_declare("glimpse_context_default_params", ContextParams)
_declare("glimpse_context_create", status, P, ctypes.POINTER(ContextParams), PP)
_declare("glimpse_context_free", None, P)
_declare("glimpse_image_default_params", ImageParams)
_declare("glimpse_image_load_file", status, ctypes.c_char_p, ctypes.POINTER(ImageParams), PP)
_declare("glimpse_image_load_memory", status, ctypes.c_void_p, ctypes.c_size_t, ctypes.POINTER(ImageParams), PP)
_declare("glimpse_image_from_pixels", status, ctypes.c_void_p, ctypes.c_int, ctypes.c_int, ctypes.c_size_t,
         ctypes.c_int, PP)
_declare("glimpse_image_free", None, P)
_declare("glimpse_image_width", ctypes.c_int, P)
_declare("glimpse_image_height", ctypes.c_int, P)
_declare("glimpse_embed_images", status, P, PP, ctypes.c_size_t, c_float_p)
_declare("glimpse_embed_texts", status, P, ctypes.POINTER(ctypes.c_char_p), ctypes.c_size_t, c_float_p)
_declare("glimpse_score", status, P, c_float_p, ctypes.c_size_t, c_float_p, ctypes.c_size_t, c_float_p)
_declare("glimpse_dot_rows", status, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_size_t, ctypes.c_void_p,
         ctypes.c_size_t, c_float_p, ctypes.c_int, c_float_p)
_declare("glimpse_tokenize", status, P, ctypes.c_char_p, c_int32_p, ctypes.c_size_t, c_size_t_p)
_declare("glimpse_caption_default_params", CaptionParams)
_declare("glimpse_caption_images", status, P, PP, ctypes.c_size_t, ctypes.POINTER(CaptionParams),
         ctypes.POINTER(Caption))
_declare("glimpse_caption_free", None, ctypes.POINTER(Caption))
_declare("glimpse_ask_images", status, P, PP, ctypes.c_size_t, ctypes.c_char_p, ctypes.POINTER(CaptionParams),
         ctypes.POINTER(Caption))
_declare("glimpse_ask_together", status, P, PP, ctypes.c_size_t, ctypes.c_char_p, ctypes.POINTER(CaptionParams),
         ctypes.POINTER(Caption))
_declare("glimpse_chat", status, P, ctypes.POINTER(ChatMessage), ctypes.c_size_t, ctypes.POINTER(CaptionParams),
         ctypes.POINTER(Caption))


class Region(ctypes.Structure):
    _fields_ = [("label", ctypes.c_char_p), ("shape", ctypes.c_int), ("instance", ctypes.c_size_t),
                ("coords", c_float_p), ("coord_count", ctypes.c_size_t), ("score", ctypes.c_float)]


class TaskResult(ctypes.Structure):
    _fields_ = [("task", ctypes.c_char_p), ("ids", c_int32_p), ("id_count", ctypes.c_size_t),
                ("text", ctypes.c_void_p), ("answer", ctypes.c_void_p), ("regions", ctypes.POINTER(Region)),
                ("region_count", ctypes.c_size_t), ("json", ctypes.c_void_p)]


_declare("glimpse_run_task", status, P, PP, ctypes.c_size_t, ctypes.c_char_p, ctypes.c_char_p,
         ctypes.POINTER(CaptionParams), ctypes.POINTER(TaskResult))
_declare("glimpse_task_result_free", None, ctypes.POINTER(TaskResult))
_declare("glimpse_task_region", status, ctypes.c_int, ctypes.c_int, ctypes.c_float * 4, ctypes.c_char_p,
         ctypes.c_size_t)
_declare("glimpse_match", status, P, PP, ctypes.c_size_t, ctypes.POINTER(ctypes.c_char_p), ctypes.c_size_t,
         ctypes.c_int, c_float_p)
_declare("glimpse_index_open", status, ctypes.c_char_p, P, PP)
_declare("glimpse_index_free", None, P)
_declare("glimpse_index_check_model", status, P, P)
_declare("glimpse_index_model_path", ctypes.c_char_p, P)
_declare("glimpse_index_count", ctypes.c_size_t, P)
_declare("glimpse_index_verify", status, P, c_bool_p)
_declare("glimpse_index_update", status, P, P, ctypes.POINTER(ctypes.c_char_p), ctypes.c_size_t,
         ctypes.POINTER(IndexParams), ctypes.POINTER(IndexSummary))
_declare("glimpse_index_import", status, P, ctypes.c_char_p, ctypes.POINTER(IndexParams), ctypes.POINTER(IndexSummary))
_declare("glimpse_index_search", status, P, c_float_p, ctypes.c_size_t, ctypes.POINTER(SearchResult), c_size_t_p)


class SearchFilter(ctypes.Structure):
    _fields_ = [("text_in", ctypes.c_char_p), ("object", ctypes.c_char_p)]


_declare("glimpse_index_search_filtered", status, P, c_float_p, ctypes.c_size_t, ctypes.POINTER(SearchFilter),
         ctypes.POINTER(SearchResult), c_size_t_p)
_declare("glimpse_embed_query", status, P, ctypes.c_char_p, c_float_p)
_declare("glimpse_index_get_stats", status, P, ctypes.POINTER(IndexStats))
_declare("glimpse_index_embedding_dim", ctypes.c_size_t, P)
_declare("glimpse_index_remove", status, P, ctypes.c_char_p, c_size_t_p)
_declare("glimpse_index_prune", status, P, c_size_t_p)
_declare("glimpse_index_embedding", status, P, ctypes.c_char_p, c_float_p)
_declare("glimpse_index_duplicates", status, P, ctypes.c_float, GroupCallback, ctypes.c_void_p, c_size_t_p)
_declare("glimpse_image_pixels", ctypes.POINTER(ctypes.c_uint8), P)
INDEX_DUPLICATE_COSINE = 0.95  # GLIMPSE_INDEX_DUPLICATE_COSINE
_declare("glimpse_query_needs_images", ctypes.c_bool, ctypes.c_char_p)
_declare("glimpse_video_default_options", VideoOptions)
_declare("glimpse_is_video", ctypes.c_bool, ctypes.c_void_p, ctypes.c_size_t)
_declare("glimpse_video_open", status, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_char_p,
         ctypes.POINTER(VideoOptions), PP)
_declare("glimpse_video_next", status, P, PP, ctypes.POINTER(ctypes.c_double))
_declare("glimpse_video_whole", ctypes.c_bool, P)
_declare("glimpse_video_close", None, P)
_declare("glimpse_video_sampling_text", None, ctypes.POINTER(VideoOptions), ctypes.c_char_p, ctypes.c_size_t)
_declare("glimpse_video_frames_new", P, ctypes.POINTER(VideoOptions))
_declare("glimpse_video_frames_free", None, P)

# ------------------------------------------------------------------ explanation

EXPLAIN_MAP_KINDS = {0: "cross_attention", 1: "rollout", 2: "occlusion", 3: "attention_pool", 4: "queries"}
CAPABILITY_CAPTION, CAPABILITY_ASK = 2, 3  # glimpse_capability
EXPLAIN_SHEET = ctypes.c_size_t(-1).value  # GLIMPSE_EXPLAIN_SHEET
ExplainMapCallback = ctypes.CFUNCTYPE(ctypes.c_bool, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t)


class ExplainMap(ctypes.Structure):
    _fields_ = [("kind", ctypes.c_int), ("label", ctypes.c_char_p), ("first_token", ctypes.c_size_t),
                ("token_count", ctypes.c_size_t), ("grid", c_float_p), ("query_count", ctypes.c_size_t),
                ("queries", c_float_p)]


class ExplainTensor(ctypes.Structure):
    _fields_ = [("name", ctypes.c_char * 32), ("rank", ctypes.c_size_t), ("shape", ctypes.c_size_t * 4),
                ("data", c_float_p)]


class Explanation(ctypes.Structure):
    _fields_ = [("text", ctypes.c_void_p), ("ids", c_int32_p), ("id_count", ctypes.c_size_t),
                ("score", ctypes.c_float), ("grid_width", ctypes.c_int), ("grid_height", ctypes.c_int),
                ("image_width", ctypes.c_int), ("image_height", ctypes.c_int), ("region", ctypes.c_float * 4),
                ("maps", ctypes.POINTER(ExplainMap)), ("map_count", ctypes.c_size_t),
                ("raw", ctypes.POINTER(ExplainTensor)), ("raw_count", ctypes.c_size_t)]


class ExplainParams(ctypes.Structure):
    _fields_ = [("layer", ctypes.c_int), ("head", ctypes.c_int), ("want_raw", ctypes.c_bool),
                ("occlusion", ctypes.c_bool), ("on_map", ExplainMapCallback), ("user", ctypes.c_void_p),
                ("want_vision", ctypes.c_bool)]


ExplanationP = ctypes.POINTER(Explanation)
_declare("glimpse_explain_default_params", ExplainParams)
_declare("glimpse_explain_caption", status, P, P, ctypes.POINTER(CaptionParams), ctypes.POINTER(ExplainParams),
         ctypes.POINTER(ExplanationP))
_declare("glimpse_explain_answer", status, P, P, ctypes.c_char_p, ctypes.POINTER(CaptionParams),
         ctypes.POINTER(ExplainParams), ctypes.POINTER(ExplanationP))
_declare("glimpse_model_kind_can", ctypes.c_bool, ctypes.c_int, ctypes.c_int)
_declare("glimpse_explain_match", status, P, P, ctypes.c_char_p, ctypes.POINTER(ExplainParams),
         ctypes.POINTER(ExplanationP))
_declare("glimpse_explain_clip", status, P, P, ctypes.c_char_p, ctypes.POINTER(ExplainParams),
         ctypes.POINTER(ExplanationP))
_declare("glimpse_explanation_free", None, ExplanationP)
_declare("glimpse_explain_render_png", status, ExplanationP, P, ctypes.c_size_t, ctypes.c_int, ctypes.c_char_p,
         PP, c_size_t_p)

libc = ctypes.CDLL(None)  # free() for what the library hands over (glimpse_explain_render_png's PNG)
libc.free.restype, libc.free.argtypes = None, [ctypes.c_void_p]


# ------------------------------------------------------------------ libglimpse-faiss (include/glimpse_faiss.h)

FAISS_SONAME = "libglimpse-faiss.so.0"


class FaissSearchParams(ctypes.Structure):
    _fields_ = [("nprobe", ctypes.c_size_t), ("rescore", ctypes.c_bool), ("rescore_factor", ctypes.c_size_t)]


_faiss_lib = None


def faiss_library():
    """libglimpse-faiss.so.0 (the FAISS folder's search, built with GLIMPSE_WITH_FAISS), loaded on first use and
    found as libglimpse is: $GLIMPSE_FAISS_LIBRARY, the source tree's build/, then the dynamic loader's search."""
    global _faiss_lib
    if _faiss_lib is not None:
        return _faiss_lib
    explicit = os.environ.get("GLIMPSE_FAISS_LIBRARY")
    source_build = Path(__file__).resolve().parents[2] / "build" / FAISS_SONAME
    candidates = [explicit] if explicit else ([str(source_build)] if source_build.is_file() else []) + [FAISS_SONAME]
    tried = []
    for candidate in candidates:
        try:
            found = ctypes.CDLL(candidate)
            break
        except OSError as error:
            tried.append(f"{candidate}: {error}")
    else:
        raise ImportError("glimpse.faiss: cannot load libglimpse-faiss (glimpse built with GLIMPSE_WITH_FAISS; set "
                          "GLIMPSE_FAISS_LIBRARY to its path); tried " + "; ".join(tried))
    declarations = {
        "glimpse_faiss_open": (status, ctypes.c_char_p, ctypes.c_int, ctypes.POINTER(ctypes.c_void_p)),
        "glimpse_faiss_close": (None, ctypes.c_void_p),
        "glimpse_faiss_count": (ctypes.c_size_t, ctypes.c_void_p),
        "glimpse_faiss_dim": (ctypes.c_size_t, ctypes.c_void_p),
        "glimpse_faiss_populate": (status, ctypes.c_void_p, ctypes.POINTER(ctypes.c_double)),
        "glimpse_faiss_search_rows": (status, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t,
                                      ctypes.POINTER(FaissSearchParams), ctypes.c_void_p, ctypes.c_void_p, c_size_t_p),
        "glimpse_faiss_last_error": (ctypes.c_char_p,),
    }
    for name, (restype, *argtypes) in declarations.items():
        function = getattr(found, name)
        function.restype, function.argtypes = restype, list(argtypes)
    _faiss_lib = found
    return found
