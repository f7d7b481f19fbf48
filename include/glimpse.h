/* glimpse.h — the public C API of glimpse, a vision-language model runtime.
 * This is the only header a media application includes. It does not expose
 * tensors, kernels or file formats; those stay inside the library.
 *
 * Walk-through:
 *
 *     glimpse_model *model = NULL;
 *     glimpse_context *ctx = NULL;
 *     glimpse_image *image = NULL;
 *     if (glimpse_model_load("clip-vit-base-patch32", NULL, &model) != GLIMPSE_STATUS_OK ||
 *         glimpse_context_create(model, NULL, &ctx) != GLIMPSE_STATUS_OK || // one per thread
 *         glimpse_image_load_file("cat.jpg", NULL, &image) != GLIMPSE_STATUS_OK) {
 *         fprintf(stderr, "%s\n", glimpse_last_error());
 *         return 1; // (after freeing what was made: every *_free takes NULL)
 *     }
 *     size_t dim = glimpse_model_embedding_dim(model);
 *     float *image_embedding = malloc(dim * sizeof(float));
 *     float *text_embedding = malloc(dim * sizeof(float));
 *     const char *text = "a photo of a cat";
 *     float logit;
 *     if (glimpse_embed_images(ctx, &image, 1, image_embedding) != GLIMPSE_STATUS_OK ||
 *         glimpse_embed_texts(ctx, &text, 1, text_embedding) != GLIMPSE_STATUS_OK ||
 *         glimpse_score(model, image_embedding, 1, text_embedding, 1, &logit) != GLIMPSE_STATUS_OK)
 *         fprintf(stderr, "%s\n", glimpse_last_error()); // a failed malloc is refused as a NULL argument
 *     else
 *         printf("%.4f\n", logit);
 *     free(image_embedding), free(text_embedding);
 *     glimpse_image_free(image);
 *     glimpse_context_free(ctx);
 *     glimpse_model_free(model);
 *
 * Captioning is the same with a BLIP captioning model or a ViT-GPT2 one. The default params
 * leave the search to the model's own settings (its generation_config.json):
 *
 *     glimpse_caption_params params = glimpse_caption_default_params();
 *     params.prompt = "a picture of";
 *     glimpse_caption caption;
 *     if (glimpse_caption_images(blip_ctx, &image, 1, &params, &caption) != GLIMPSE_STATUS_OK)
 *         fprintf(stderr, "%s\n", glimpse_last_error());
 *     else
 *         puts(caption.text);
 *     glimpse_caption_free(&caption); // left empty by a failure: freeing it is harmless
 *
 * and BLIP retrieval models score pairs with glimpse_match; glimpse_index_*
 * keeps a photo collection searchable. SigLIP models embed and score as CLIP
 * does; their scores carry SigLIP's logit_bias, and the probability that a
 * text matches an image is the sigmoid of that pair's logit alone.
 *
 * Thread safety: a loaded glimpse_model is read-only and may be shared by any
 * number of threads at once. A glimpse_context holds the scratch memory of
 * one computation at a time: give each thread its own. glimpse_image handles
 * are read-only once made and may be shared. glimpse_last_error() is
 * per thread.
 *
 * Errors: every fallible call returns a glimpse_status. GLIMPSE_STATUS_OK is 0.
 * glimpse_status_string() names a status; glimpse_last_error() gives the
 * detail of the most recent failure on the calling thread (which file, which
 * tensor, which field). The library never prints and never exits.
 *
 * Ownership: a function that creates a handle writes it to an out-parameter;
 * the caller owns it and releases it with the matching *_free function
 * (which accepts NULL). Buffers passed in are borrowed for the duration of the
 * call unless a function says otherwise. Output arrays are caller-allocated.
 */
#ifndef GLIMPSE_H
#define GLIMPSE_H

#include <math.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define GLIMPSE_VERSION_MAJOR 0
#define GLIMPSE_VERSION_MINOR 1
#define GLIMPSE_VERSION_PATCH 0
#define GLIMPSE_VERSION_STRING "0.1.0"

/* The version of the library actually linked, "MAJOR.MINOR.PATCH". */
const char *glimpse_version(void);

/* The optional parts of glimpse, each chosen when glimpse is built (the CMake
 * option -DGLIMPSE_WITH_NAME=ON|OFF, all ON by default). In a build without a
 * part its calls return GLIMPSE_STATUS_UNSUPPORTED, and glimpse_last_error()
 * says "... is not in this build of glimpse (built with -DGLIMPSE_WITH_NAME=OFF)";
 * a picture whose decoder is left out gets that message rather than "not an image". */
typedef enum glimpse_feature {
    GLIMPSE_FEATURE_VIDEO = 0, /* video frames through FFmpeg (glimpse_video_*) */
    GLIMPSE_FEATURE_HEIF = 1,  /* HEIF/HEIC and AVIF pictures through libheif */
    GLIMPSE_FEATURE_TIFF = 2,  /* TIFF pictures through libtiff */
    GLIMPSE_FEATURE_WEBP = 3,  /* WebP pictures through libwebp */
    GLIMPSE_FEATURE_INDEX = 4, /* the search index on SQLite (glimpse_index_*) */
    GLIMPSE_FEATURE_SERVER = 5, /* `glimpse serve` (libmicrohttpd; the program only, not the library) */
    GLIMPSE_FEATURE_FAISS = 6   /* `glimpse search --faiss` (FAISS; the program only, not the library) */
} glimpse_feature;

/* Whether this build of glimpse has the part (false for a value not listed above). */
bool glimpse_has_feature(glimpse_feature feature);
/* The parts this build has, by name, separated by spaces, in the order above
 * ("video heif tiff webp index server faiss" in a full build, "" in a minimal one). */
const char *glimpse_build_features(void);

/* ------------------------------------------------------------------- log */

typedef enum glimpse_log_level {
    GLIMPSE_LOG_LEVEL_DEBUG = 0,
    GLIMPSE_LOG_LEVEL_INFO = 1,
    GLIMPSE_LOG_LEVEL_WARNING = 2
} glimpse_log_level;

/* Receives the library's diagnostics (what a model load found, how many
 * bytes it mapped and copied, ...). The message is valid during the call only.
 * May be called from any thread that calls into glimpse. */
typedef void (*glimpse_log_callback)(void *user, glimpse_log_level level, const char *message);

/* Sets the process-wide log callback (NULL, the default, discards the
 * messages). Safe to call at any time from any thread. */
void glimpse_set_log_callback(glimpse_log_callback callback, void *user);

/* ---------------------------------------------------------------- status */

typedef enum glimpse_status {
    GLIMPSE_STATUS_OK = 0,
    GLIMPSE_STATUS_INVALID_ARGUMENT, /* a NULL, nothing to work on (zero images or texts), an option out of range */
    GLIMPSE_STATUS_IO,               /* a file could not be opened, read or mapped */
    GLIMPSE_STATUS_NOT_FOUND,        /* a file, model or tensor that should exist does not */
    GLIMPSE_STATUS_BAD_FORMAT,       /* a file's content is malformed, truncated or inconsistent */
    GLIMPSE_STATUS_UNSUPPORTED,      /* well-formed, but a kind of model or image we do not run */
    GLIMPSE_STATUS_TOO_LARGE,        /* over a configured limit (pixels, tokens, sizes) */
    GLIMPSE_STATUS_OUT_OF_MEMORY,
    GLIMPSE_STATUS_WRONG_MODEL,      /* the model cannot do what was asked (e.g. caption with CLIP) */
    GLIMPSE_STATUS_CANCELLED,
    GLIMPSE_STATUS_INTERNAL,
    GLIMPSE_STATUS_BUSY /* another process is doing it now (e.g. updating the same index) */
} glimpse_status;

/* A short constant English phrase for a status; never NULL. */
const char *glimpse_status_string(glimpse_status status);

/* The detail of the last failure on this thread ("" if none). The string is
 * owned by the library and valid until the next glimpse call on this thread. */
const char *glimpse_last_error(void);

/* ----------------------------------------------------------------- model */

typedef struct glimpse_model glimpse_model;

typedef enum glimpse_model_kind {
    GLIMPSE_MODEL_KIND_CLIP = 1,          /* CLIPModel: embed, rank, classify */
    GLIMPSE_MODEL_KIND_BLIP_CAPTION = 2,  /* BlipForConditionalGeneration */
    GLIMPSE_MODEL_KIND_BLIP_RETRIEVAL = 3, /* BlipForImageTextRetrieval */
    GLIMPSE_MODEL_KIND_SIGLIP = 4,         /* SiglipModel: embed, rank, classify (sigmoid probabilities) */
    GLIMPSE_MODEL_KIND_VIT_GPT2 = 5,       /* VisionEncoderDecoderModel, ViT + GPT-2: caption */
    GLIMPSE_MODEL_KIND_BLIP2 = 6,          /* Blip2ForConditionalGeneration (OPT): caption, ask */
    GLIMPSE_MODEL_KIND_FLORENCE2 = 7,      /* Florence2ForConditionalGeneration: caption, tasks (OCR, objects) */
    GLIMPSE_MODEL_KIND_LLAVA = 8           /* LlavaForConditionalGeneration (Llama, Qwen2): ask, caption */
} glimpse_model_kind;

typedef enum glimpse_precision {
    GLIMPSE_PRECISION_FLOAT32 = 0, /* the checkpoint's numbers (16-bit ones widened): the reference's results */
    GLIMPSE_PRECISION_INT8 = 1     /* the transformer layers' projections and the LM head quantized at load:
                                      8-bit weights with a scale per output channel, activations quantized
                                      per token at each product; about 3x faster towers and 2x faster
                                      caption steps, close to but not equal to the reference */
} glimpse_precision;

typedef struct glimpse_load_params {
    /* Load only the towers needed: set one to false to skip it (e.g. a text
     * search needs no vision tower; BLIP always loads both). Both default to
     * true. */
    bool load_vision;
    bool load_text;
    /* GLIMPSE_PRECISION_FLOAT32 (the default) or GLIMPSE_PRECISION_INT8.
     * int8 converts the weights at load (a quarter of their float32 size, held
     * beside the mapped file) and runs on AVX-512 VNNI where the CPU has it. */
    glimpse_precision precision;
} glimpse_load_params;

glimpse_load_params glimpse_load_default_params(void);

/* Loads a model from a Hugging Face snapshot folder (config.json,
 * model.safetensors or a sharded index, tokenizer and preprocessor files), or
 * from a hub id such as "openai/clip-vit-base-patch32" found in the local
 * Hugging Face cache ($HF_HUB_CACHE, else $HF_HOME/hub, else
 * ~/.cache/huggingface/hub). Weights are memory-mapped, not copied.
 * params may be NULL for the defaults. On success *out owns the model; free it
 * with glimpse_model_free. On failure *out is NULL. */
glimpse_status glimpse_model_load(const char *path_or_hub_id, const glimpse_load_params *params,
                                  glimpse_model **out);
void glimpse_model_free(glimpse_model *model);

glimpse_model_kind glimpse_model_get_kind(const glimpse_model *model);

/* What a kind of model does: the one table the command line, glimpse serve and the Python binding ask, so a
 * family added later is offered wherever it can serve. */
typedef enum glimpse_capability {
    GLIMPSE_CAPABILITY_EMBED = 0,   /* glimpse_embed_*, glimpse_score, search indexes (CLIP, SigLIP) */
    GLIMPSE_CAPABILITY_RANK = 1,    /* texts against images: the embedding families and BLIP retrieval (ITM) */
    GLIMPSE_CAPABILITY_CAPTION = 2, /* glimpse_caption_images and glimpse_explain_caption (BLIP, ViT-GPT2, BLIP-2,
                                       LLaVA, Florence-2) */
    GLIMPSE_CAPABILITY_ASK = 3,     /* glimpse_ask_images and glimpse_explain_answer (BLIP-2, LLaVA) */
    GLIMPSE_CAPABILITY_EXPLAIN = 4, /* one of the glimpse_explain_* calls (every kind) */
    GLIMPSE_CAPABILITY_MATCH = 5,   /* glimpse_match and glimpse_explain_match: image-text matching heads (BLIP
                                       retrieval: ITM probabilities, ITC similarities) */
    GLIMPSE_CAPABILITY_TASK = 6,    /* glimpse_run_task: Florence-2's tasks (OCR, objects, grounding, regions) */
    GLIMPSE_CAPABILITY_CHAT = 7     /* glimpse_chat: conversations about pictures (LLaVA, BLIP-2) */
} glimpse_capability;
/* Whether models of `kind` can do `capability` (false for an unknown kind or capability). */
bool glimpse_model_kind_can(glimpse_model_kind kind, glimpse_capability capability);
/* Length of the projected embeddings (CLIP projection_dim, SigLIP hidden_size);
 * 0 for a model without embeddings. */
size_t glimpse_model_embedding_dim(const glimpse_model *model);

typedef struct glimpse_model_info {
    glimpse_model_kind kind;
    const char *architecture; /* e.g. "CLIPModel"; owned by the model */
    const char *path;         /* the resolved snapshot folder; owned by the model */
    int image_size;           /* pixels on a side fed to the vision tower */
    int patch_size;
    int vision_hidden_size, vision_layers, vision_heads;
    int text_hidden_size, text_layers, text_heads;
    int text_max_tokens;
    int vocab_size;
    int embedding_dim;
    const char *vision_activation, *text_activation; /* owned by the model */
    size_t parameter_count;
    size_t weight_bytes; /* bytes of tensor data mapped */
    const char *weight_dtype; /* "F32", "F16", "BF16" or "mixed" */
    float logit_scale;   /* already exponentiated */
    /* Bytes allocated at load for float32 copies of stored tensors: float16
     * and bfloat16 embeddings, norms and biases (their weight matrices stay
     * 16-bit, mapped, where the CPU has AVX-512; elsewhere they are widened
     * too), and tensors stored at unaligned offsets. Int8 weights not counted. */
    size_t copied_bytes;
    float logit_bias; /* SigLIP's, added to every logit; 0 for CLIP */
    glimpse_precision precision; /* as loaded (glimpse_load_params) */
    /* true when the snapshot has no preprocessor_config.json and images are
     * preprocessed with the family's defaults (a warning is logged): they may
     * not be the checkpoint's, and a search index refuses such a model */
    bool preprocessor_defaults;
    /* true when the model scores each image-text pair on its own with a sigmoid (SigLIP): its probabilities
     * over several labels need not sum to one; false for a softmax over them (CLIP) */
    bool sigmoid_scores;
    /* one line saying what the family is, for `glimpse info` (owned by the model; NULL: none) */
    const char *description;
} glimpse_model_info;

glimpse_status glimpse_model_get_info(const glimpse_model *model, glimpse_model_info *out);

/* Room for any glimpse_model_identity, with its NUL. */
#define GLIMPSE_MODEL_IDENTITY_CAPACITY 128
/* Writes the identity a search index records of a model,
 * "ARCHITECTURE/EMBEDDING_DIM/HASH" (the hash covers config.json and the
 * projection tensors), into out (capacity bytes, at least
 * GLIMPSE_MODEL_IDENTITY_CAPACITY): embeddings made elsewhere with this
 * model (glimpse.dask's shards) carry it, so that an index can tell they are
 * its model's. Equal identities with equal precisions give equal embeddings. */
glimpse_status glimpse_model_identity(const glimpse_model *model, char *out, size_t capacity);

/* --------------------------------------------------------------- context */

typedef struct glimpse_context glimpse_context;

typedef struct glimpse_context_params {
    int threads; /* worker threads for this context; 0 = all cores. Created once with the
                    context, each with 1 MiB of scratch for the products. */
    /* Optional progress of long calls over many images (embedding, captioning,
     * matching): called after each batch with how many of the call's images
     * are done. Return true to cancel the call (GLIMPSE_STATUS_CANCELLED). */
    bool (*on_progress)(void *user, size_t done, size_t total);
    void *user;
} glimpse_context_params;

glimpse_context_params glimpse_context_default_params(void);

/* A context holds one computation's scratch memory and its thread pool. It
 * borrows the model, which must outlive it. One thread at a time. */
glimpse_status glimpse_context_create(const glimpse_model *model, const glimpse_context_params *params,
                                      glimpse_context **out);
void glimpse_context_free(glimpse_context *ctx);

/* ----------------------------------------------------------------- image */

typedef struct glimpse_image glimpse_image;

typedef struct glimpse_image_params {
    /* Refuse images with more pixels than this before decoding them
     * (default 178956970, Pillow's decompression-bomb limit). */
    uint64_t max_pixels;
    /* true: keep the pixels as stored, ignoring the EXIF orientation. false
     * (the default): turn the image upright as transformers' load_image does
     * (PIL.ImageOps.exif_transpose), for JPEG, PNG, WebP and TIFF. HEIF and
     * AVIF always come out with their own rotation, mirroring and crop applied,
     * as libheif applies them. */
    bool ignore_exif_orientation;
} glimpse_image_params;

glimpse_image_params glimpse_image_default_params(void);

typedef enum glimpse_pixel_format {
    GLIMPSE_PIXEL_FORMAT_RGB8 = 1,  /* 3 bytes a pixel: R, G, B */
    GLIMPSE_PIXEL_FORMAT_RGBA8 = 2, /* 4 bytes: R, G, B, A (alpha dropped) */
    GLIMPSE_PIXEL_FORMAT_BGRA8 = 3  /* 4 bytes: B, G, R, A (alpha dropped) */
} glimpse_pixel_format;

/* Decodes an image file (JPEG, PNG, WebP's first frame, TIFF's first page,
 * HEIC, AVIF, BMP, GIF's first frame, TGA, PNM) to RGB as Pillow's
 * convert("RGB") does (HEIC/AVIF: as heif-convert), upright by its EXIF
 * orientation unless params say otherwise. params may be NULL. */
glimpse_status glimpse_image_load_file(const char *path, const glimpse_image_params *params,
                                       glimpse_image **out);
/* The same from encoded bytes in memory; the bytes are only borrowed. */
glimpse_status glimpse_image_load_memory(const void *bytes, size_t size, const glimpse_image_params *params,
                                         glimpse_image **out);
/* The same, naming the bytes by label (a path, say; NULL: "image in memory") in its errors, and made
 * ready for a model when prepare_for is not NULL: resized as the model's preprocessing resizes, so that
 * embedding the image later resizes nothing and gives the same numbers (the resize is done here, on the
 * caller's thread: an application decoding ahead of the model moves that work off the model's thread).
 * fast_decode (with prepare_for): a JPEG is decoded at the smallest DCT scale that keeps both sides at
 * least what the resize needs, then resized exactly; faster on large photographs, and close to but not
 * bit for bit the exact path (glimpse embed --fast-decode). prepare_for is only read. */
glimpse_status glimpse_image_decode(const void *bytes, size_t size, const char *label,
                                    const glimpse_image_params *params, const glimpse_model *prepare_for,
                                    bool fast_decode, glimpse_image **out);
/* Replaces *image by its copy resized for model (freeing the original), as glimpse_image_decode's
 * prepare_for does; leaves it when no resize is needed. On failure *image is kept (the caller's). */
glimpse_status glimpse_image_prepare(const glimpse_model *model, glimpse_image **image);
/* A new copy of image resized to width × height (each at least 1) with Pillow's bicubic filter
 * (Image.resize(..., BICUBIC)), as thumbnails are made; the caller frees *out. */
glimpse_status glimpse_image_resize(const glimpse_image *image, int width, int height, glimpse_image **out);
/* Copies decoded pixels. stride is the distance in bytes between rows
 * (0 = width × bytes per pixel). */
glimpse_status glimpse_image_from_pixels(const uint8_t *pixels, int width, int height, size_t stride,
                                         glimpse_pixel_format format, glimpse_image **out);
void glimpse_image_free(glimpse_image *image);
int glimpse_image_width(const glimpse_image *image);
int glimpse_image_height(const glimpse_image *image);
/* The RGB8 pixels, width × height × 3, rows packed; owned by the image. */
const uint8_t *glimpse_image_pixels(const glimpse_image *image);

/* ------------------------------------------------------------- embedding */

/* Embeds count images as a batch: out receives count × embedding_dim floats,
 * projected and L2-normalised (transformers' image_embeds). count 0 is
 * GLIMPSE_STATUS_INVALID_ARGUMENT, as in every call that takes images or texts. */
glimpse_status glimpse_embed_images(glimpse_context *ctx, glimpse_image *const *images, size_t count,
                                    float *out);
/* Embeds count UTF-8 texts (transformers' text_embeds); texts longer than the
 * model's context are truncated as the reference tokenizer truncates. */
glimpse_status glimpse_embed_texts(glimpse_context *ctx, const char *const *texts, size_t count, float *out);

/* Scores every image against every text: logits[i * text_count + t] =
 * logit_scale × cosine(image i, text t) + logit_bias, as CLIP's and SigLIP's
 * logits_per_image (CLIP has no bias; SigLIP's probability that text t
 * describes image i is sigmoid(logit), each pair on its own). The
 * embeddings are those returned by glimpse_embed_*. Zero images or texts is
 * GLIMPSE_STATUS_INVALID_ARGUMENT. */
glimpse_status glimpse_score(const glimpse_model *model, const float *image_embeddings, size_t image_count,
                             const float *text_embeddings, size_t text_count, float *logits);

/* Inner products of stored vectors with a query, for re-scoring a vector
 * index's candidates exactly (glimpse.faiss does it on its memory-mapped
 * vectors.npy): out[i] = Σ_d matrix[rows[i]·dim + d] · query[d] for i < n,
 * where matrix holds count rows of dim floats; rows NULL means rows 0 .. n-1.
 * The rows are read in the order given (sort them to read a mapped file
 * forward), the next ones prefetched, over `threads` threads (<= 0: every
 * core; fewer than 1,024 rows run on the caller alone). Summed in float (in
 * double without AVX-512). GLIMPSE_STATUS_INVALID_ARGUMENT, with nothing
 * written, when a row is outside [0, count). No model needed. */
glimpse_status glimpse_dot_rows(const float *matrix, size_t count, size_t dim, const int64_t *rows, size_t n,
                                const float *query, int threads, float *out);

/* Token ids of a text as the model's tokenizer gives them (with start and end
 * tokens, truncated to the model's context; SigLIP's padded with its end token
 * to exactly 64, as its processor pads them; ViT-GPT2's GPT-2 tokenizer adds
 * none, as its encode does). Writes at most capacity ids and
 * sets *count to the full number; GLIMPSE_STATUS_TOO_LARGE if they did not fit. */
glimpse_status glimpse_tokenize(const glimpse_model *model, const char *text, int32_t *ids, size_t capacity,
                                size_t *count);

/* ------------------------------------------------------------ captioning */

/* Called as each caption token is chosen: image is the index in the call,
 * id the token, text the caption so far (decoded, special tokens skipped;
 * owned by the library, valid during the call). Greedy and sampled decoding
 * call it token by token; beam search calls it for each token of the winning
 * caption once it is known. Return true to cancel the whole call
 * (GLIMPSE_STATUS_CANCELLED). */
typedef bool (*glimpse_token_callback)(void *user, size_t image, int32_t id, const char *text);

/* A caption setting left to the model: glimpse_caption_images takes the
 * snapshot's generation_config.json value (as transformers' generate reads
 * it; its lengths count the start token, ours do not), and where the file
 * does not set it, glimpse's own default (given with each field).
 * glimpse_caption_default_params() leaves those five fields to the model. */
#define GLIMPSE_CAPTION_MODEL_DEFAULT (-1)        /* for max_tokens, min_tokens, beams */
#define GLIMPSE_CAPTION_MODEL_DEFAULT_PENALTY NAN /* for length_penalty, repetition_penalty */

/* The widest beam search. */
#define GLIMPSE_CAPTION_MAX_BEAMS 16

typedef struct glimpse_caption_params {
    const char *prompt;       /* text the caption continues ("a picture of"); NULL = none */
    int max_tokens;           /* most tokens to generate, after the start token and prompt; left to the
                                 model: max_length - 1, else 20 */
    int min_tokens;           /* fewest tokens before [SEP] may end it; left to the model: min_length - 1,
                                 else 5, and never more than max_tokens */
    int beams;                /* beam width, 1 to GLIMPSE_CAPTION_MAX_BEAMS; 1 = greedy or sampling; left
                                 to the model: num_beams, else 3 (1 when sampling) */
    float length_penalty;     /* beam scores are divided by length^this; left to the model:
                                 length_penalty, else 1 */
    float repetition_penalty; /* > 1 discourages repeats; left to the model: repetition_penalty, else 1 = off */
    bool sample;              /* sample instead of searching (beams 1 or left to the model); default false */
    float temperature;        /* sampling (default 1) */
    int top_k;                /* sampling: keep the k most likely tokens (default 50; 0 = off) */
    float top_p;              /* sampling: nucleus probability (default 1 = off) */
    uint64_t seed;            /* sampling: the same seed gives the same caption (default 0) */
    glimpse_token_callback on_token; /* optional (default NULL) */
    void *user;
    /* Continuous batching when a call captions several images: the decoder steps of up to this many sequences
     * (an image takes `beams` of them) run as one step, which reads the decoder's weights once for all; images
     * join as others' captions finish. Captions are token for token those of one image at a time. 0 (the
     * default) = GLIMPSE_CAPTION_DEFAULT_BATCH_ROWS images' beams (16 images in flight, greedy or not); 1 = one
     * image at a time. Memory grows with it: per
     * sequence its key/value cache (layers × 2 × hidden × positions floats: BLIP-base, 21 positions, 1.5 MB),
     * per image in flight its cross-attention keys and values (layers × 2 × hidden × image tokens: BLIP-base at
     * 384 px, 42.5 MB; ViT-GPT2, 14.5 MB). With several images, on_token hears each image's tokens in order,
     * but the images' tokens interleave (images step together; image says which), and an image's callbacks
     * all come before those of any image after it in the call only when batch_rows is 1. */
    int batch_rows;
} glimpse_caption_params;

/* glimpse_caption_params.batch_rows' default: this many images step together, each with its beams. */
#define GLIMPSE_CAPTION_DEFAULT_BATCH_ROWS 16

/* Every search setting left to the model, no prompt, no callback, the
 * sampling defaults above: what glimpse_caption_images takes for params NULL. */
glimpse_caption_params glimpse_caption_default_params(void);
/* The settings this model's captions get from glimpse_caption_default_params():
 * every field left to the model resolved to its value (for a model without a
 * generation_config.json, glimpse's own defaults), none left to the model. */
glimpse_caption_params glimpse_caption_model_params(const glimpse_model *model);

typedef struct glimpse_caption {
    char *text;     /* decoded as transformers' decode(ids, skip_special_tokens=True); caller frees */
    int32_t *ids;   /* the whole sequence: start token, prompt, generated tokens ([SEP] if it ended on it);
                       BLIP-2: start token 2 and the generated tokens, as its generate returns them; LLaVA:
                       the generated tokens */
    size_t id_count;
    /* The families that build a prompt (LLaVA, and glimpse_chat): the prompt as given to the tokenizer, its ids
     * (one image token per picture, or the expanded runs it had), the positions the language model read
     * (image tokens expanded to the image's rows) and how many of them came from the context's cache of an
     * earlier call (glimpse_chat). NULL and 0 otherwise. */
    char *prompt;
    int32_t *prompt_ids;
    size_t prompt_id_count;
    size_t prompt_positions, cached_positions;
    bool ended; /* glimpse_chat: the answer stopped on the model's end token (else at max_tokens) */
} glimpse_caption;

/* Captions count (at least 1) images with a BLIP, ViT-GPT2 or BLIP-2 captioning model: out[i]
 * receives image i's caption; free each with glimpse_caption_free. params
 * NULL is glimpse_caption_default_params(): the model's own settings. On
 * failure every out[i] is left empty. */
glimpse_status glimpse_caption_images(glimpse_context *ctx, glimpse_image *const *images, size_t count,
                                      const glimpse_caption_params *params, glimpse_caption *out);
void glimpse_caption_free(glimpse_caption *caption);

/* Visual question answering (BLIP-2, LLaVA): each image's answer to `question`, generated after the
 * family's prompt — BLIP-2's "Question: QUESTION Answer:" (the prompt its paper and model card use), LLaVA's
 * chat template with the picture before the question — with params as for
 * glimpse_caption_images but for params.prompt, which must be NULL (free
 * prompts go through glimpse_caption_images' prompt). A separate call rather
 * than a field of the params: the prompt's wording is BLIP-2's, and other
 * captioners cannot answer (GLIMPSE_STATUS_WRONG_MODEL). With BLIP-2, here
 * and in glimpse_caption_images, ids are as its generate returns them: the
 * start token 2 and the generated tokens, not the prompt; a BLIP-2 model
 * without generation_config.json takes its text_config's settings (greedy,
 * max_length 20: 19 new tokens, no minimum). */
glimpse_status glimpse_ask_images(glimpse_context *ctx, glimpse_image *const *images, size_t count,
                                  const char *question, const glimpse_caption_params *params, glimpse_caption *out);

/* ------------------------------------------------------- tasks (Florence-2) */

/* The shape of one region a task finds, its coordinates in the picture's pixels (EXIF orientation applied) as
 * x, y pairs. */
typedef enum glimpse_region_shape {
    GLIMPSE_REGION_BOX = 0,    /* x0, y0, x1, y1: top left and bottom right, as the model wrote them */
    GLIMPSE_REGION_QUAD = 1,   /* x1, y1 ... x4, y4: a line of text's four corners (OCR with regions) */
    GLIMPSE_REGION_POLYGON = 2 /* the outline's points; one object may be several polygons (same instance) */
} glimpse_region_shape;

typedef struct glimpse_region {
    const char *label;          /* the object's label, the phrase, or the line's text ("" for none) */
    glimpse_region_shape shape;
    size_t instance;            /* polygons: the object they outline (0, 1, ...); otherwise the region's index */
    const float *coords;        /* coord_count floats, x and y alternating; owned by the result */
    size_t coord_count;
    float score;                /* the model card's confidence (mean of the tokens' probabilities); NAN: none */
} glimpse_region;

typedef struct glimpse_task_result {
    char *task;                 /* the task as the model card names it, e.g. "<OD>" */
    int32_t *ids;               /* as generate returns them: start token, ..., end token */
    size_t id_count;
    char *text;                 /* ids decoded as the model card decodes them (special tokens kept) */
    char *answer;               /* text tasks (captions, OCR, region descriptions): the answer; else NULL */
    glimpse_region *regions;    /* region tasks (objects, grounding, OCR lines, polygons): what was found */
    size_t region_count;
    char *json;                 /* the processor's post_process_generation result, {"TASK": ...}, as JSON */
} glimpse_task_result;

/* Runs a Florence-2 task on each image: `task` exactly as the model card names it ("<CAPTION>",
 * "<DETAILED_CAPTION>", "<MORE_DETAILED_CAPTION>", "<OD>", "<DENSE_REGION_CAPTION>", "<REGION_PROPOSAL>", "<OCR>",
 * "<OCR_WITH_REGION>", and with an input: "<CAPTION_TO_PHRASE_GROUNDING>", "<REFERRING_EXPRESSION_SEGMENTATION>",
 * "<OPEN_VOCABULARY_DETECTION>" a phrase; "<REGION_TO_SEGMENTATION>", "<REGION_TO_CATEGORY>",
 * "<REGION_TO_DESCRIPTION>", "<REGION_TO_OCR>" a region, as four "<loc_N>" tokens or glimpse_task_region's
 * pixels). input NULL for the tasks that take none. params as for glimpse_caption_images but for params.prompt
 * (NULL); NULL: the checkpoint's own settings as its generate applies them. out[i] receives image i's result;
 * free each with glimpse_task_result_free. Other models: GLIMPSE_STATUS_WRONG_MODEL. */
glimpse_status glimpse_run_task(glimpse_context *ctx, glimpse_image *const *images, size_t count, const char *task,
                                const char *input, const glimpse_caption_params *params, glimpse_task_result *out);
void glimpse_task_result_free(glimpse_task_result *result);
/* The four "<loc_N>" tokens a region task takes for the box region = {x0, y0, x1, y1} in pixels of a picture
 * width × height, quantised as Florence-2's processor quantises boxes (floor(x / (width / 1000)), clamped to
 * 0 ... 999, in float32), into out (capacity at least 64 bytes). */
glimpse_status glimpse_task_region(int width, int height, const float region[4], char *out, size_t capacity);
/* The picture with the result's regions drawn on it (boxes, quads and polygons outlined, each with its label
 * above it, in the font of glimpse_explain_*) as a PNG in new memory (*png, *size; the caller frees with
 * free()). */
glimpse_status glimpse_task_draw(const glimpse_image *image, const glimpse_task_result *result, void **png,
                                 size_t *size);

/* One answer about several pictures together (LLaVA; any number, 0 for a question about no picture): the
 * question after all the pictures in the checkpoint's chat template, or, question NULL, params->prompt
 * verbatim with one "<image>" per picture in order (or an expanded run of the model's image tokens per picture).
 * out->ids are the generated tokens, the end token included when generation stopped on it. Models that answer
 * about one picture at a time (BLIP-2) and others: GLIMPSE_STATUS_WRONG_MODEL. */
glimpse_status glimpse_ask_together(glimpse_context *ctx, glimpse_image *const *images, size_t count,
                                    const char *question, const glimpse_caption_params *params, glimpse_caption *out);

/* ------------------------------------------------------ conversations (LLaVA, BLIP-2) */

/* One part of a message: a text (image NULL) or a picture (text NULL). */
typedef struct glimpse_chat_part {
    const char *text;
    glimpse_image *image;
} glimpse_chat_part;

/* One message: role "system", "user" or "assistant", and its parts in order. */
typedef struct glimpse_chat_message {
    const char *role;
    const glimpse_chat_part *parts;
    size_t part_count;
} glimpse_chat_message;

/* The assistant's next message after messages[0..count) (the last one the user's): LLaVA renders the
 * conversation with the checkpoint's chat template (each message's pictures before its text, as the templates
 * put them), BLIP-2 as its model card chains questions ("Question: Q1 Answer: A1 Question: Q2 Answer:", one
 * picture in all, system texts first). params as for glimpse_ask_images (prompt NULL); out->ids are the
 * generated tokens, out->prompt and prompt_ids what was asked. The context keeps the language model's key/value
 * cache of its last conversation (LLaVA, greedy or sampling): a call whose conversation starts as that one did
 * — the same tokens and the same pictures, as when the reply and a new question are appended — runs only the
 * positions after the common start (out->cached_positions says how many it kept), and answers as a call from
 * an empty cache does. Other models: GLIMPSE_STATUS_WRONG_MODEL. */
glimpse_status glimpse_chat(glimpse_context *ctx, const glimpse_chat_message *messages, size_t count,
                            const glimpse_caption_params *params, glimpse_caption *out);

/* --------------------------------------------------- image-text matching */

typedef enum glimpse_match_mode {
    /* BLIP ITM: the probability that the text describes the image, from the
     * text encoder running with cross-attention over the image. Precise;
     * costs a text-encoder pass per (image, text) pair. */
    GLIMPSE_MATCH_MODE_ITM = 0,
    /* BLIP ITC: cosine of the image's and the text's contrastive projections,
     * each computed once. Fast, coarser. */
    GLIMPSE_MATCH_MODE_ITC = 1
} glimpse_match_mode;

/* Scores every image against every text with a BLIP retrieval model
 * (BlipForImageTextRetrieval): scores[i * text_count + t]. Each image is
 * encoded once, whatever the number of texts. Zero images or texts is
 * GLIMPSE_STATUS_INVALID_ARGUMENT. */
glimpse_status glimpse_match(glimpse_context *ctx, glimpse_image *const *images, size_t image_count,
                             const char *const *texts, size_t text_count, glimpse_match_mode mode, float *scores);

typedef struct glimpse_ranked {
    size_t index;      /* into the images given */
    float first_score; /* the score it was shortlisted by */
    float score;       /* its ITM match probability */
} glimpse_ranked;

/* Two-stage ranking: of count images with first-stage scores (e.g. CLIP
 * logits from glimpse_score, higher is better), the top_k are re-scored with
 * ITM against text by this BLIP retrieval context and returned best first in
 * out (capacity top_k); *out_count = min(top_k, count). count or top_k 0 is
 * a shortlist with nothing in it (*out_count = 0), not an error. */
glimpse_status glimpse_rerank(glimpse_context *ctx, const char *text, glimpse_image *const *images, size_t count,
                              const float *first_scores, size_t top_k, glimpse_ranked *out, size_t *out_count);

/* ---------------------------------------------------------- search index */

/* A search index of a photo collection: an SQLite file holding each image's
 * path, size, modification time, content hash and CLIP or SigLIP embedding,
 * with the model's identity recorded once. Not shared between threads: one
 * handle per thread (SQLite handles concurrent processes). */
typedef struct glimpse_index glimpse_index;

/* Opens db_path, creating it if needed. With model (a CLIP or SigLIP model),
 * an index built with another model is refused (GLIMPSE_STATUS_WRONG_MODEL) and
 * a new index records this model. With model NULL the index must exist already
 * and is opened read-only, for searching: nothing is written (no -wal or
 * -shm file either), so it works on read-only media and on another user's
 * files; glimpse_index_update refuses such a handle. Caller closes with
 * glimpse_index_free. */
glimpse_status glimpse_index_open(const char *db_path, const glimpse_model *model, glimpse_index **out);
void glimpse_index_free(glimpse_index *index);

/* GLIMPSE_STATUS_WRONG_MODEL, naming the index's model, unless model is the
 * one the index was built with. */
glimpse_status glimpse_index_check_model(const glimpse_index *index, const glimpse_model *model);

/* The model folder the index was built with (owned by the index). */
const char *glimpse_index_model_path(const glimpse_index *index);
/* Files stored, a video once (a count over the whole table: slow on a large index). */
size_t glimpse_index_count(const glimpse_index *index);
/* The size of the embeddings the index holds (read when it was opened). */
size_t glimpse_index_embedding_dim(const glimpse_index *index);
/* The full check of the index file: SQLite's integrity_check, then every
 * row's shape and (*checksummed set) its checksum; an index made before
 * checksums (*checksummed false) gets them on its next writing open.
 * Damage is GLIMPSE_STATUS_BAD_FORMAT, "FILE is damaged: ...". */
glimpse_status glimpse_index_verify(glimpse_index *index, bool *checksummed);
/* The precision of the embeddings the index holds (recorded when it was
 * built; an index from before the record: float32 until its next update).
 * A model loaded at another precision is refused by glimpse_index_open and
 * glimpse_index_check_model (GLIMPSE_STATUS_WRONG_MODEL), as is a model
 * without preprocessor_config.json (glimpse_model_info.preprocessor_defaults)
 * when it would embed images. */
glimpse_precision glimpse_index_precision(const glimpse_index *index);

typedef struct glimpse_index_summary {
    size_t added, updated, moved, removed, unchanged, failed;
    size_t roots_failed; /* paths given, or folders below them, missing or unreadable (see on_root_failure) */
    size_t read;         /* pictures whose words were read (glimpse_index_params.words) */
} glimpse_index_summary;

/* Videos for an index: glimpse_video_frames_new (below) gives FFmpeg's
 * sampled frames, as glimpse index takes them; a caller may bring its own.
 * Called on the update's decoding thread, one video at a time, in order. */
typedef struct glimpse_frame_source {
    /* whether a file's bytes are a video this source reads (else it is taken for an image) */
    bool (*is_video)(void *user, const uint8_t *bytes, size_t size);
    /* opens the video in bytes (borrowed until close); path names it in errors */
    glimpse_status (*open)(void *user, const char *path, const uint8_t *bytes, size_t size, void **video);
    /* the next sampled frame (a new image, which the index frees) and its time
     * in seconds from the start; *frame NULL after the last */
    glimpse_status (*next)(void *user, void *video, glimpse_image **frame, double *seconds);
    void (*close)(void *user, void *video);
    void *user;
    /* how frames are chosen, in words ("every 2 s", "scenes 0.1"): recorded in
     * the index when it first holds videos; an update with another is refused */
    const char *sampling;
} glimpse_frame_source;

/* ---- videos: sampled frames, through FFmpeg's libraries (libavformat,
 * libavcodec, libswscale). A video is read from memory only: no other file,
 * pipe or network address is ever opened. */

typedef struct glimpse_video_options {
    /* > 0: the first frame at or after each multiple of this many seconds
     * (default 2) */
    double every_seconds;
    /* > 0: instead, a frame where its 64x64 grey thumbnail differs from the
     * last frame taken by this mean absolute difference (of full scale;
     * glimpse index --scenes's default is 0.1); 0: use every_seconds */
    double scene_threshold;
    uint64_t max_pixels;  /* frames with more pixels are refused (0 = the image limit) */
    bool ignore_rotation; /* keep frames as stored, ignoring the display matrix */
} glimpse_video_options;

glimpse_video_options glimpse_video_default_options(void);
/* The scene threshold glimpse index --scenes and glimpse embed --scenes take when given none. */
#define GLIMPSE_VIDEO_DEFAULT_SCENE_THRESHOLD 0.1

/* Whether bytes look like a video container read here (MP4/MOV,
 * Matroska/WebM, AVI, MPEG-TS/PS, FLV, ASF, Ogg) rather than a still image. */
bool glimpse_is_video(const uint8_t *bytes, size_t size);

typedef struct glimpse_video glimpse_video;

/* Opens the video in bytes, which must stay valid until glimpse_video_close;
 * label names it in errors (a path, say). options may be NULL (defaults). */
glimpse_status glimpse_video_open(const uint8_t *bytes, size_t size, const char *label,
                                  const glimpse_video_options *options, glimpse_video **out);
/* The next sampled frame (a new image, upright, RGB8 as the ffmpeg tool
 * converts it to rgb24; free with glimpse_image_free) and its time in
 * seconds from the start of the file; *frame NULL after the last. A
 * damaged packet is skipped; a video where no frame decodes is an error. */
glimpse_status glimpse_video_next(glimpse_video *video, glimpse_image **frame, double *seconds);
/* Whether the file reads to its end with the frames its container lists,
 * known from the open (which reads every packet once without decoding):
 * false for a video damaged or cut short, whose frames before the damage
 * glimpse_video_next still gives (and warns, through the log, after the
 * last); true for a NULL video. */
bool glimpse_video_whole(const glimpse_video *video);
void glimpse_video_close(glimpse_video *video);

/* The sampling in words, as an index records it ("every 2 s", "at scene
 * changes of 0.1"), NUL-terminated within capacity. */
void glimpse_video_sampling_text(const glimpse_video_options *options, char *text, size_t capacity);

/* A frame source for glimpse_index_params.frames that samples every video
 * with options (NULL: defaults); NULL when out of memory. Free it with
 * glimpse_video_frames_free (only a source made here) after the update. */
glimpse_frame_source *glimpse_video_frames_new(const glimpse_video_options *options);
void glimpse_video_frames_free(glimpse_frame_source *frames);

/* What a picture shows in words, for an index searchable by them (glimpse_index_search_filtered): its text and
 * its objects' labels. glimpse_task_words_new gives Florence-2's; a caller may bring its own. */
typedef struct glimpse_words_source {
    /* The picture's text into *text and its objects' labels, one a line, into *labels (new strings the index
     * frees; "" for none), each only when the pointer is not NULL. Called on the updating thread. */
    glimpse_status (*read)(void *user, glimpse_image *image, char **text, char **labels);
    void *user;
    const char *identity; /* which reader (its model's identity): the index records it and refuses another */
} glimpse_words_source;

/* The words source of a Florence-2 context: its text by <OCR>, its objects' labels by <OD> (greedy, the
 * checkpoint's other settings); NULL when out of memory, or for a context of a model without tasks
 * (glimpse_last_error says which). Free it with glimpse_task_words_free after the update. */
glimpse_words_source *glimpse_task_words_new(glimpse_context *ctx);
void glimpse_task_words_free(glimpse_words_source *words);

typedef struct glimpse_index_params {
    /* progress over the files that need embedding; return true to stop
     * (what was committed stays; GLIMPSE_STATUS_CANCELLED) */
    bool (*on_progress)(void *user, size_t done, size_t total);
    /* an unreadable or broken file, skipped; one stored before keeps its
     * entry, marked failed: left out of search results, tried again by the
     * next update (summary->failed counts both) */
    void (*on_failure)(void *user, const char *path, const char *reason);
    void *user;
    uint64_t max_pixels; /* 0 = the default image limit */
    /* a path given that is missing (GLIMPSE_STATUS_NOT_FOUND) or cannot be
     * read (GLIMPSE_STATUS_IO), or a folder below one that cannot be read:
     * nothing under it is judged, its stored entries are kept, the other
     * paths are indexed and the call still returns GLIMPSE_STATUS_OK; one
     * call per such path (path and reason valid during the call) */
    void (*on_root_failure)(void *user, const char *path, glimpse_status status, const char *reason);
    /* glob patterns (fnmatch) of files and folders to leave out: one without
     * a slash matches a file or folder name ("*.gif", ".thumbnails"), one
     * with a slash the whole absolute path (a star in it crosses slashes);
     * stored entries they take under the paths given are forgotten. May be
     * NULL (count 0). */
    const char *const *exclude;
    size_t exclude_count;
    /* videos: with a source, files with a video extension are found under
     * folders too (search/walk.c's list), and each is stored as one file of
     * many frames, an entry per frame with its time (a changed video replaces
     * them all; one that fails is a failed entry). NULL: no videos. */
    const glimpse_frame_source *frames;
    /* JPEGs decoded in the DCT domain, scaled to the smallest 1/8 step not
     * below the model's resize (glimpse embed --fast-decode): recorded in the
     * index when it is built; an update with the other choice is refused */
    bool fast_decode;
    /* the pictures' words (NULL: none read; what is stored stays): after the embeddings, every still picture
     * stored without the words asked (read_text: its text; read_objects: its objects' labels) is decoded again
     * and read, in transactions of a few; on_progress then counts those pictures from 0 again. Video frames
     * are not read. */
    const glimpse_words_source *words;
    bool read_text, read_objects;
} glimpse_index_params;

/* Brings the index up to date with the given files and folders (walked
 * recursively for image files): embeds new and changed files with ctx (a
 * context of the index's model), recognises moved or renamed files by
 * content hash without embedding them again, and forgets files under the
 * paths given that no longer exist (entries under other paths, and under
 * paths missing or unreadable, stay: summary->roots_failed counts those
 * and params->on_root_failure names each). Each batch is committed on its own: a crash or kill loses
 * nothing committed, and the next run resumes. One update at a time: while
 * another process updates the same index, GLIMPSE_STATUS_BUSY naming it
 * (a process that died holding the index does not block it). params may be NULL. With
 * count 0 it only forgets the stored files that no longer exist. */
glimpse_status glimpse_index_update(glimpse_index *index, glimpse_context *ctx, const char *const *paths,
                                    size_t count, const glimpse_index_params *params,
                                    glimpse_index_summary *summary);

/* Merges the embeddings glimpse.dask wrote into folder (manifest.json,
 * part-NNNNN.npy + part-NNNNN.json; python/glimpse/shards.py) into the
 * index without embedding anything. The manifest's model identity
 * (glimpse_model_identity), precision and embedding size must be the
 * index's (GLIMPSE_STATUS_WRONG_MODEL otherwise, nothing imported). Each
 * shard is read and checked whole first (the .npy header bounds-checked,
 * its shape against its .json's pictures, every row a normalised
 * embedding): one absent, partial or damaged is reported through
 * params->on_failure (its .npy path, the reason), counted in
 * summary->roots_failed and skipped, never half imported; the others are
 * stored one transaction each. A picture is imported only if its file is
 * here with the size and time it had when it was embedded (its content hash
 * is read from it); else it is reported and counted in summary->failed, as
 * are the files the run found broken and video frames (the index keeps no
 * frame times). A path stored with the same size, time and hash is counted
 * unchanged (importing twice adds nothing), another stored path updated.
 * on_progress counts shards. Needs a handle opened with a model (any of the
 * index's: nothing is embedded), and the writer's turn as for an update. */
glimpse_status glimpse_index_import(glimpse_index *index, const char *folder, const glimpse_index_params *params,
                                    glimpse_index_summary *summary);

/* What an index holds, for `glimpse index --stats`. */
typedef struct glimpse_index_stats {
    size_t images; /* files stored (a video counts once, however many frames) */
    size_t failed; /* of them, files that failed to read or decode when last tried: left out of search results */
    size_t dim;    /* embedding size */
    glimpse_precision precision;
    const char *model_path, *model_identity; /* owned by the index */
    uint64_t file_bytes;                     /* the database's size */
    size_t videos, frames;                   /* of images, the videos, and the frames stored for them */
    const char *video_sampling;              /* recorded; NULL before the index held videos (owned by the index) */
    bool fast_decode;                        /* built with glimpse_index_params.fast_decode */
} glimpse_index_stats;
glimpse_status glimpse_index_get_stats(glimpse_index *index, glimpse_index_stats *out);

/* A file or folder given to an update (every one ever given, until removed
 * or pruned): the entries stored under it, and whether it exists now. */
typedef void (*glimpse_index_root_callback)(void *user, const char *path, size_t images, bool present);
/* Calls on_root for each such path, sorted. */
glimpse_status glimpse_index_list_roots(glimpse_index *index, glimpse_index_root_callback on_root, void *user);
/* An entry: its path, and why its file failed when last tried (NULL if it did not). Valid during the call. */
typedef void (*glimpse_index_entry_callback)(void *user, const char *path, const char *failure);
/* Calls on_entry for every entry, sorted by path. */
glimpse_status glimpse_index_list(glimpse_index *index, glimpse_index_entry_callback on_entry, void *user);
/* Forgets the entry of the file at path, or every entry under the folder
 * at path (which need not exist any more; relative to the working folder
 * unless absolute); *removed counts them. Needs a handle opened with the
 * model, and the writer's turn (GLIMPSE_STATUS_BUSY as for an update). */
glimpse_status glimpse_index_remove(glimpse_index *index, const char *path, size_t *removed);
/* Forgets every entry whose file no longer exists, wherever it was (a
 * drive unplugged too: only on request), and the paths given to updates
 * that are gone. Needs a handle opened with the model. */
glimpse_status glimpse_index_prune(glimpse_index *index, size_t *removed);

typedef struct glimpse_search_result {
    const char *path; /* owned by the index; valid until the next update or close */
    float score;      /* logit_scale × cosine + logit_bias, as glimpse_score */
    double time;      /* a video frame's time in seconds; negative for a still picture */
} glimpse_search_result;

/* The k stored images closest to a query embedding (L2-normalised, as the
 * glimpse_embed_* functions return), best first. *found = min(k, count). */
glimpse_status glimpse_index_search(glimpse_index *index, const float *query, size_t k,
                                    glimpse_search_result *results, size_t *found);

/* Filters on the pictures' words (an index whose update read them: glimpse_index_params.words). NULL or "":
 * no filter. Case and diacritics are folded ("Crème" finds "creme"); the words are split where letters and
 * digits end. */
typedef struct glimpse_search_filter {
    const char *text_in; /* every word of it appears in the picture's text, in any order */
    const char *object;  /* one of the picture's objects is labelled this (its words in this order) */
} glimpse_search_filter;

/* The k best stored pictures that pass the filter, best first: ranked by the query embedding as
 * glimpse_index_search ranks (score the same), or with query NULL by how well their words match (score:
 * SQLite FTS5's bm25 relevance, negated so that higher is better). An index without words is refused
 * (GLIMPSE_STATUS_INVALID_ARGUMENT, saying how to build it). Paths as glimpse_index_search's. */
glimpse_status glimpse_index_search_filtered(glimpse_index *index, const float *query, size_t k,
                                             const glimpse_search_filter *filter, glimpse_search_result *results,
                                             size_t *found);

/* The embedding of a combined query: parts joined by " + " and " - ", each
 * optionally weighted ("2:sunset + beach - people"); a part written @PATH
 * ("@~/Pictures/dog.jpg", a leading ~ is $HOME) is that image file, embedded
 * as an image (GLIMPSE_STATUS_NOT_FOUND if it does not exist), the rest are
 * texts ("@@" starts a text with @). A text part that looks like an image
 * file name ("dog.jpg") is refused (GLIMPSE_STATUS_INVALID_ARGUMENT): it is
 * most likely an image part without its @. The weighted sum of the parts'
 * normalised embeddings, normalised. */
glimpse_status glimpse_embed_query(glimpse_context *ctx, const char *query, float *out);
/* Whether some part of the query is an image (@PATH), so the model needs
 * its vision tower. */
bool glimpse_query_needs_images(const char *query);

/* The embedding stored for the file at path (relative to the working
 * folder, links resolved as the index stores them) into out (dim floats),
 * checked against its row's checksum: a picture's neighbours without
 * embedding it again (glimpse search --like). GLIMPSE_STATUS_NOT_FOUND if the
 * index has no entry for it (or only a failed one). */
glimpse_status glimpse_index_embedding(glimpse_index *index, const char *path, float *out);

/* The default of glimpse_index_duplicates' min_cosine, measured with the
 * demo CLIP on its pictures and their re-encoded, resized, cropped and
 * brightened copies (bench/duplicate_threshold.py; docs/search.md). */
#define GLIMPSE_INDEX_DUPLICATE_COSINE 0.95f

/* A group of near-identical pictures: paths (owned by the index, valid
 * until the next update or close) and each one's cosine to the first. */
typedef void (*glimpse_index_group_callback)(void *user, const char *const *paths, const float *similarity,
                                             size_t count);
/* Groups the stored pictures whose embeddings' cosine is at least
 * min_cosine, joined transitively (a chain of near-identical pairs is one
 * group); calls on_group once per group of two or more, and counts them in
 * *groups. GLIMPSE_INDEX_DUPLICATE_COSINE is the default threshold. Scores
 * every pair: count² × dim / 2 multiply-adds (100,000 pictures of 512: 2.6e12). */
glimpse_status glimpse_index_duplicates(glimpse_index *index, float min_cosine, glimpse_index_group_callback on_group,
                                        void *user, size_t *groups);
/* ---------------------------------------------------------- explanation */

/* What a model looked at, as maps over the grid of image patches it saw:
 * per word of a caption (BLIP captioning, ViT-GPT2: the decoder's
 * cross-attention; BLIP-2: the language model's attention over the
 * Q-Former's queries times their cross-attention over the patches),
 * per word of a text and for the whole text (BLIP ITM: the text encoder's
 * cross-attention), or per image and text (CLIP, SigLIP: the vision tower's
 * attention rollout, an occlusion map, and SigLIP's attention-pooling head).
 * Attention is recorded only inside these calls; the other calls record
 * nothing and cost nothing more.
 *
 * Conventions (the same in every call):
 * - A word's attention map is the attention of the query that chose it
 *   (caption: the row of the position before the word, whose logits picked
 *   it; ITM: the row of the word's own token), averaged over every layer and
 *   head (or the one layer / head asked for), over the patch columns only
 *   (the class token's column dropped) and renormalised to sum 1.
 * - A word made of several word pieces ("sk", "##ate") gets the mean of its
 *   pieces' maps (each sums to 1, so the mean does too). Byte-level BPE
 *   (ViT-GPT2, BLIP-2): a token starting with a space ("Ġ") or other
 *   whitespace starts a word, the tokens after it without one join it;
 *   whitespace-only tokens (a newline) belong to no word; labels are the
 *   word's decoded text without its surrounding whitespace.
 * - ITM's whole-text map is the [CLS] row: the token the match head reads.
 * - Rollout (Abnar and Zuidema 2020): per layer the heads' mean A, then
 *   (A + I) with rows renormalised, multiplied through the layers (last layer
 *   on the left); the map is the class token's row (CLIP) or, for SigLIP, which
 *   has none, the attention-pooling head's (heads averaged) times the rollout.
 *   layer L rolls out layers 0..L; head H takes that head instead of the mean.
 * - Occlusion: the drop of the image-text logit when one patch of the
 *   model's input is replaced by the input's mean colour (one patch at a
 *   time, all occluded copies run as batches); positive = the patch helped.
 */

typedef enum glimpse_explain_map_kind {
    GLIMPSE_EXPLAIN_MAP_CROSS_ATTENTION = 0, /* a word's or the text's cross-attention (BLIP) */
    GLIMPSE_EXPLAIN_MAP_ROLLOUT = 1,         /* vision attention rollout (CLIP, SigLIP) */
    GLIMPSE_EXPLAIN_MAP_OCCLUSION = 2,       /* logit drop per occluded patch (CLIP, SigLIP) */
    GLIMPSE_EXPLAIN_MAP_ATTENTION_POOL = 3,  /* SigLIP's attention-pooling head, heads averaged */
    GLIMPSE_EXPLAIN_MAP_QUERIES = 4          /* BLIP-2: the Q-Former queries' cross-attention, queries averaged */
} glimpse_explain_map_kind;

typedef struct glimpse_explain_map {
    glimpse_explain_map_kind kind;
    char *label;        /* the word, "[text]" for ITM's whole-text map, or "rollout", "occlusion", "attention pool" */
    size_t first_token; /* the word's tokens: ids[first_token .. first_token + token_count) (0, 0: no word) */
    size_t token_count;
    float *grid; /* [grid_height × grid_width], row-major: grid[row × grid_width + column] is the patch at
                    that row and column of the model's input; attention maps sum to 1 */
    /* BLIP-2's words: which of the Q-Former's query tokens the word attended to, queries[query_count] (the
     * language model's attention from the word's row to the query positions, renormalised to sum 1; the
     * grid is Σ queries[q] · the map of query q). 0 and NULL for every other map. */
    size_t query_count;
    float *queries;
} glimpse_explain_map;

/* A raw tensor, float32, row-major. */
typedef struct glimpse_explain_tensor {
    char name[32]; /* "vision_attentions", "attention_pool", "cross_attentions", "self_attentions",
                      "encoder_attentions", "qformer_cross_attentions", "qformer_self_attentions" */
    size_t rank;
    size_t shape[4];
    float *data;
} glimpse_explain_tensor;

/* An explanation owns everything it points to; glimpse_explanation_free frees it all. */
typedef struct glimpse_explanation {
    char *text;      /* the caption (decoded as glimpse_caption's) or the text explained */
    int32_t *ids;    /* the token ids the maps index: the caption's whole sequence, or the text's */
    size_t id_count;
    float score;     /* ITM: match probability; CLIP, SigLIP: logit (with SigLIP's bias); caption: NAN */
    int grid_width, grid_height; /* patches across and down */
    int image_width, image_height; /* the picture given */
    /* Where the grid lies on the picture given, in its pixel coordinates (pixel x spans x .. x+1): left, top,
     * right, bottom of what the preprocessing's resize and crop kept; it extends past the picture where the
     * crop padded it. Cropped-away margins are outside it. */
    float region[4];
    glimpse_explain_map *maps; /* map_count maps: per word in text order, then the whole-image/text maps */
    size_t map_count;
    /* With want_raw: the recorded attention probabilities, as one forward pass over `ids` (or the image)
     * computes them. Caption (BLIP, ViT-GPT2): cross_attentions [layers, heads, id_count, image_tokens] and
     * self_attentions [layers, heads, id_count, id_count]; BLIP-2: self_attentions [layers, heads, positions,
     * positions] of the language model, positions = the query tokens, the prompt's tokens (OPT's "</s>"
     * first) and every generated token (ids[1 ..]), qformer_cross_attentions [cross layers, heads, queries,
     * image_tokens] (the layers cross_attention_frequency gives, in order) and qformer_self_attentions
     * [layers, heads, queries, queries]; with want_vision also the vision tower's self-attention
     * [layers, heads, tokens, tokens], named encoder_attentions (ViT-GPT2) or vision_attentions (BLIP,
     * BLIP-2). ITM: cross_attentions [layers, heads, id_count, image_tokens]; CLIP, SigLIP:
     * vision_attentions [layers, heads, tokens, tokens], SigLIP also attention_pool [heads, tokens].
     * Image token columns are the vision tower's tokens in order (class token first where there is one). */
    glimpse_explain_tensor *raw;
    size_t raw_count;
} glimpse_explanation;

/* Called as each map is finished (explanation and map valid during the call; the explanation is still being
 * filled: only maps[0 .. map] and ids[0 .. maps[map].first_token + maps[map].token_count] are complete, and text
 * is not set yet). A greedy or sampled caption's words come while it is generated: each as soon as the token
 * after it is chosen (before the caption params' on_token hears of that token), the last when the caption ends.
 * Return true to cancel (GLIMPSE_STATUS_CANCELLED). */
typedef bool (*glimpse_explain_map_callback)(void *user, const glimpse_explanation *explanation, size_t map);

typedef struct glimpse_explain_params {
    int layer;      /* -1 (default): every layer averaged; else that layer alone (rollout: layers 0 .. layer) */
    int head;       /* -1 (default): every head averaged; else that head alone */
    bool want_raw;  /* keep the raw probabilities (default false; they can be large: every layer and head) */
    bool occlusion; /* CLIP, SigLIP: make the occlusion map (default true; one tower pass per patch) */
    glimpse_explain_map_callback on_map; /* optional */
    void *user;
    /* Captioners, with want_raw: also keep the vision tower's self-attention of every layer (default false;
     * large: BLIP-2's ViT-g is 39 layers × 16 heads × 257² floats, 165 MB). */
    bool want_vision;
} glimpse_explain_params;

glimpse_explain_params glimpse_explain_default_params(void);

/* Captions one image with a captioning model — BLIP, ViT-GPT2, BLIP-2, LLaVA or Florence-2 (caption_params as
 * glimpse_caption_images takes them, their on_token still called; NULL: the model's own settings) — and
 * explains every generated word (the prompt's are not explained). The caption is the one
 * glimpse_caption_images gives. Greedy and sampled captions record their decoder steps as they go; beam
 * search, which reorders its sequences, and want_raw's every row get one more decoder pass over the chosen
 * sequence, recording (both equal the reference's one pass within 1e-5). On success *out is the caller's,
 * freed with glimpse_explanation_free; on failure NULL.
 * BLIP-2's language model sees the Q-Former's query tokens, not patches: a word's map is
 * Σ_q w_q · map_q, w the language model's attention from the word's row to the query positions
 * (layers and heads as asked: layer and head index the language model's) renormalised over the queries, and
 * map_q query q's cross-attention over the patches in the Q-Former (every cross-attention layer and head
 * averaged, class column dropped, renormalised); the result renormalised. The explanation ends with one
 * GLIMPSE_EXPLAIN_MAP_QUERIES map, the mean of every query's map.
 * LLaVA and Florence-2 are explained by one recorded pass after the caption is made (the maps come once it is
 * finished): a word's map is the row that chose its first token over the picture's patches — LLaVA's language
 * model's self-attention to the picture's rows (raw tensor "self_attentions" [layers, heads, positions,
 * positions]), Florence-2's decoder cross-attention to the image rows on DaViT's last grid ("cross_attentions",
 * with "encoder_attentions" and "decoder_self_attentions") — averaged over layers and heads or as picked, and
 * renormalised. want_vision keeps no vision-tower attention for these two. */
glimpse_status glimpse_explain_caption(glimpse_context *ctx, const glimpse_image *image,
                                       const glimpse_caption_params *caption_params,
                                       const glimpse_explain_params *params, glimpse_explanation **out);
/* BLIP-2 and LLaVA: answers question about the image as glimpse_ask_images does (BLIP-2's prompt "Question: {q}
 * Answer:", LLaVA's chat template; caption_params.prompt must be NULL) and explains the answer's words as
 * glimpse_explain_caption does. */
glimpse_status glimpse_explain_answer(glimpse_context *ctx, const glimpse_image *image, const char *question,
                                      const glimpse_caption_params *caption_params,
                                      const glimpse_explain_params *params, glimpse_explanation **out);
/* One image and one text with a BLIP retrieval model: the ITM match probability, a map per word and the
 * whole-text map. */
glimpse_status glimpse_explain_match(glimpse_context *ctx, const glimpse_image *image, const char *text,
                                     const glimpse_explain_params *params, glimpse_explanation **out);
/* One image and one text with a CLIP or SigLIP model: the logit, the rollout map, the occlusion map (when
 * asked) and SigLIP's attention-pooling map. text NULL: the rollout (and SigLIP's pool map) alone. The
 * context's on_progress counts the occluded copies done (the grid's patches) and may cancel. */
glimpse_status glimpse_explain_clip(glimpse_context *ctx, const glimpse_image *image, const char *text,
                                    const glimpse_explain_params *params, glimpse_explanation **out);
void glimpse_explanation_free(glimpse_explanation *explanation);

/* The map upsampled onto the picture: out[height × width] (any size; the picture's own for full resolution)
 * receives the grid bilinearly interpolated at each pixel's centre through the region, NAN outside it. */
glimpse_status glimpse_explain_upsample(const glimpse_explanation *explanation, size_t map, int width, int height,
                                        float *out);

/* A PNG of the explanation over image (the picture it explains): map = GLIMPSE_EXPLAIN_SHEET for the contact
 * sheet (the picture, then one panel per map, each labelled), or a map index for that map's panel alone.
 * Panels are panel_size pixels on their longest side (0: 256). Heat maps are scaled to their largest value
 * (occlusion: negative drops shown as 0), coloured with inferno and blended over the picture; labels use
 * font_path (a TrueType file; NULL: DejaVu Sans from fonts-dejavu-core). *png is the caller's (free()). */
#define GLIMPSE_EXPLAIN_SHEET ((size_t)-1)
glimpse_status glimpse_explain_render_png(const glimpse_explanation *explanation, const glimpse_image *image,
                                          size_t map, int panel_size, const char *font_path, void **png,
                                          size_t *size);
/* Writes the raw tensors (want_raw) to a safetensors file any reader opens; metadata holds the text. */
glimpse_status glimpse_explain_write_safetensors(const glimpse_explanation *explanation, const char *path);

#ifdef __cplusplus
}
#endif

#endif /* GLIMPSE_H */
