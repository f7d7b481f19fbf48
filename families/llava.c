/* llava.c — the LLaVA family (LlavaForConditionalGeneration: llava-hf/llava-1.5-*, llava-interleave-qwen-*): its
 * loader (the parts of families/llava_model.h, Llama's or Qwen2's tokenizer, the checkpoint's chat template and
 * preprocessing, generate's settings from generation_config.json) and its line of the family table. A caption
 * or an answer is one picture's: the prompt (the chat template's rendering of the question with the picture, a
 * stated instruction for a caption, or a raw prompt whose <image> marks the picture) tokenized, the picture's
 * projected features merged at its image token, the language model's search from that sequence (4.40's beam
 * scoring, every end token of the generation config). The ids a caption carries are the generated ones, the end
 * token included when it stopped on it. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/context.h"
#include "api/model.h"
#include "core/error.h"
#include "core/file.h"
#include "core/memory.h"
#include "explain/records.h"
#include "families/family.h"
#include "families/llava_model.h"
#include "families/loader_steps.h"
#include "text/chat_template.h"
#include "text/gpt2_tokenizer.h"
#include "text/llama_tokenizer.h"
#include "weights/config.h"

/* The model cards' max_new_tokens (their examples' generate calls) where generation_config.json gives none. */
#define LLAVA_MAX_NEW_TOKENS 200
/* What `glimpse caption` asks a LLaVA model for (the fixtures' caption request). */
#define LLAVA_CAPTION_INSTRUCTION "Describe the image in one sentence."

typedef struct llava_parts {
    llava_model model;
    llama_tokenizer *llama; /* Llama's SentencePiece tokenizer, or */
    gpt2_tokenizer *qwen2;  /* Qwen2's byte-level BPE */
    chat_template_kind template;
    char template_error[256]; /* why the checkpoint's chat template cannot be used ("" when it can) */
    int32_t end_ids[1 + CAPTION_MAX_MORE_END_IDS];
    size_t end_count;
} llava_parts;

typedef struct llava_run {
    llava_vision_state *vision;
    size_t images; /* pictures the vision state, pixels and features hold */
    llama_state *language;
    size_t language_beams, language_length, language_step;
    float *pixels, *features, *rows;
    size_t rows_capacity;
    /* What the language state's sequence 0 holds for the next call to continue from (a conversation's earlier
     * turns): a key per position — a token id, or −1 − r for row r of the pictures' rows in order — and those
     * pictures' pixels. held_count 0: nothing. */
    int64_t *held, *keys; /* keys: the current call's merged sequence, the same way */
    size_t held_count, held_capacity, keys_capacity;
    float *held_pixels;
    size_t held_images, held_pixel_capacity;
} llava_run;

static const llava_parts *parts_of(const glimpse_model *model) { return model->parts; }

static void free_parts(void *p) {
    llava_parts *parts = p;
    if (!parts) return;
    llava_model_free(&parts->model);
    llama_tokenizer_free(parts->llama);
    gpt2_tokenizer_free(parts->qwen2);
    free(parts);
}

static void free_run(void *r) {
    llava_run *run = r;
    if (!run) return;
    llava_vision_state_free(run->vision);
    llama_state_free(run->language);
    free(run->pixels), free(run->features), free(run->rows);
    free(run->held), free(run->keys), free(run->held_pixels);
    free(run);
}

/* generation_config.json's end tokens (one id or a list) and search settings; max_new_tokens, where given, is
 * what glimpse's max_tokens reads (its max_length counts the prompt, which a caption's settings do not). */
static glimpse_status generation_settings(glimpse_model *model, llava_parts *parts) {
    glimpse_status status = read_generation_config(model);
    if (status) return status;
    cJSON *file = model->generation, *g = cJSON_CreateObject();
    model->generation = g;
    const cJSON *ends = cJSON_GetObjectItemCaseSensitive(file, "eos_token_id"), *item;
    const cJSON *list = cJSON_IsArray(ends) ? ends : NULL;
    if (cJSON_IsNumber(ends)) parts->end_ids[parts->end_count++] = ends->valueint;
    cJSON_ArrayForEach(item, list)
        if (cJSON_IsNumber(item) && parts->end_count < 1 + CAPTION_MAX_MORE_END_IDS)
            parts->end_ids[parts->end_count++] = item->valueint;
    int beams = 1, new_tokens = LLAVA_MAX_NEW_TOKENS;
    if (file) {
        if ((status = config_int_or(file, "generation_config.json", "num_beams", 1, GLIMPSE_CAPTION_MAX_BEAMS, 1,
                                    &beams)) ||
            (status = config_int_or(file, "generation_config.json", "max_new_tokens", 1, 1 << 20,
                                    LLAVA_MAX_NEW_TOKENS, &new_tokens)))
            goto done;
    }
    if (!g || !cJSON_AddNumberToObject(g, "num_beams", beams) ||
        !cJSON_AddNumberToObject(g, "max_length", new_tokens + 1) || !cJSON_AddNumberToObject(g, "min_length", 0))
        status = ERROR_OOM();
done:
    cJSON_Delete(file);
    return status;
}

/* The tokenizer the snapshot has: tokenizer.model (Llama) or vocab.json and merges.txt (Qwen2); its <image> id
 * must be the config's image_token_index. */
static glimpse_status load_tokenizer(glimpse_model *model, llava_parts *parts) {
    char *path = file_join(model->folder, "tokenizer.model");
    if (!path) return ERROR_OOM();
    bool sentencepiece = file_is_regular(path);
    free(path);
    glimpse_status status = sentencepiece ? llama_tokenizer_load(model->folder, &parts->llama)
                                          : gpt2_tokenizer_load(model->folder, &parts->qwen2);
    if (status) return status;
    int32_t image = -1;
    if (parts->llama) image = llama_tokenizer_token_id(parts->llama, "<image>");
    else {
        size_t n = 0;
        if (!gpt2_tokenizer_encode(parts->qwen2, "<image>", 0, &image, 1, &n) && n != 1) image = -1;
    }
    if (image != parts->model.config.image_token_id)
        return error_set(GLIMPSE_STATUS_BAD_FORMAT, "%s: the tokenizer's <image> is id %d, config.json's "
                         "image_token_index %d", model->folder, image, parts->model.config.image_token_id);
    return GLIMPSE_STATUS_OK;
}

static glimpse_status load_llava(glimpse_model *model, const glimpse_load_params *params, const cJSON *vision_json,
                                 const cJSON *text_json) {
    (void)vision_json, (void)text_json; /* llava_config_read reads them from config.json itself */
    (void)params; /* int8 is quantize's */
    llava_parts *parts = calloc(1, sizeof *parts);
    if (!parts) return ERROR_OOM();
    model->parts = parts;
    llava_config config;
    glimpse_status status = llava_config_read(model->config, &config);
    if (!status) status = llava_model_load(&parts->model, &config, model->store);
    if (status) return status;
    bool siglip = config.vision.variant == VIT_VARIANT_SIGLIP;
    model->preprocess = siglip ? preprocess_default_siglip(config.vision.image_size)
                               : preprocess_default_clip(config.vision.image_size);
    if ((status = read_preprocessor(model, siglip)) || (status = load_tokenizer(model, parts)) ||
        (status = generation_settings(model, parts)))
        return status;
    if (!parts->end_count) parts->end_ids[parts->end_count++] = parts->llama ? 2 : -1;
    model->end_id = parts->end_ids[0], model->pad_id = parts->end_ids[0];
    if (chat_template_load(model->folder, &parts->template)) /* used only when a question is asked */
        snprintf(parts->template_error, sizeof parts->template_error, "%s", glimpse_last_error());
    return GLIMPSE_STATUS_OK;
}

static glimpse_status quantize(glimpse_model *model, q8_set *set) {
    return llava_model_quantize(&((llava_parts *)model->parts)->model, set);
}

/* ------------------------------------------------------------------ text */

static glimpse_status encode(const llava_parts *parts, const char *text, int32_t **ids, size_t *count) {
    if (parts->llama) return llama_tokenizer_encode(parts->llama, text, true, ids, count);
    size_t n = 0;
    glimpse_status status = gpt2_tokenizer_encode(parts->qwen2, text, 1, NULL, 0, &n);
    if (status && status != GLIMPSE_STATUS_TOO_LARGE) return status;
    *ids = malloc((n ? n : 1) * sizeof **ids);
    if (!*ids) return ERROR_OOM();
    status = gpt2_tokenizer_encode(parts->qwen2, text, 1, *ids, n, count);
    if (status) free(*ids), *ids = NULL;
    return status;
}

/* decode(ids, skip_special_tokens=True). */
static glimpse_status decode(const glimpse_model *model, const int32_t *ids, size_t count, char **text) {
    const llava_parts *parts = parts_of(model);
    if (parts->llama) return llama_tokenizer_decode(parts->llama, ids, count, true, text);
    return gpt2_tokenizer_decode(parts->qwen2, ids, count, 1, 0, text, NULL);
}

/* The chat template's rendering of one user turn: `images` pictures, then text; the assistant's turn opened. */
static glimpse_status render_turn(const glimpse_model *model, size_t images, const char *text, char **prompt) {
    const llava_parts *parts = parts_of(model);
    *prompt = NULL;
    if (parts->template_error[0])
        return error_set(GLIMPSE_STATUS_UNSUPPORTED, "%s; give the whole prompt instead (glimpse ask --prompt, with "
                         "<image> where each picture goes)", parts->template_error);
    chat_part *turn = malloc((images + 1) * sizeof *turn);
    if (!turn) return ERROR_OOM();
    for (size_t i = 0; i < images; i++) turn[i] = (chat_part){CHAT_PART_IMAGE, NULL};
    turn[images] = (chat_part){CHAT_PART_TEXT, text};
    chat_message message = {"user", turn, images + 1};
    glimpse_status status = chat_template_render(parts->template, &message, 1, 1, prompt);
    free(turn);
    return status;
}

static glimpse_status question_prompt(const glimpse_model *model, const char *question, char **prompt) {
    return render_turn(model, 1, question, prompt);
}

/* ------------------------------------------------------------------ run state */

/* The context's run state, holding at least `images` pictures (0: the text alone). */
static glimpse_status run_of(glimpse_context *ctx, size_t images, llava_run **out) {
    const llava_model *m = &parts_of(ctx->model)->model;
    if (!ctx->run && !(ctx->run = calloc(1, sizeof(llava_run)))) return ERROR_OOM();
    llava_run *run = ctx->run;
    if (images > run->images) {
        size_t side = (size_t)m->config.vision.image_size, hidden = (size_t)m->config.text.hidden_size;
        llava_vision_state_free(run->vision);
        free(run->pixels), free(run->features);
        run->vision = NULL, run->images = 0;
        /* (written whole: on huge pages when large) */
        run->pixels = memory_large(images * 3 * side * side * sizeof(float));
        run->features = memory_large(images * m->config.image_rows * hidden * sizeof(float));
        glimpse_status status = run->pixels && run->features ? GLIMPSE_STATUS_OK : ERROR_OOM();
        if (!status) status = llava_vision_state_create(m, images, &run->vision);
        if (status) return status;
        run->images = images;
    }
    *out = run;
    return GLIMPSE_STATUS_OK;
}

/* Grows *buffer to hold count items of size bytes. */
static glimpse_status grow(void **buffer, size_t *capacity, size_t count, size_t size) {
    if (count <= *capacity) return GLIMPSE_STATUS_OK;
    void *grown = realloc(*buffer, count * size);
    if (!grown) return ERROR_OOM();
    *buffer = grown, *capacity = count;
    return GLIMPSE_STATUS_OK;
}

/* A language-model state for beams × `positions` positions whose first step is `step` rows (its scratch for at
 * most LLAMA_PROMPT_CHUNK of them, as llama_state_create takes it: a longer prompt runs in chunks); the first
 * `kept` positions of sequence 0 survive a new state (with room to grow: a conversation's next turns). */
static glimpse_status room_for(const llava_model *m, llava_run *run, size_t beams, size_t positions, size_t step,
                               size_t kept) {
    if (step > LLAMA_PROMPT_CHUNK) step = LLAMA_PROMPT_CHUNK; /* as the state holds it, so that the next */
    if (step < 1) step = 1;                                    /* call's comparison sees the same number */
    if (run->language && run->language_beams >= beams && run->language_length >= positions &&
        run->language_step >= step)
        return GLIMPSE_STATUS_OK;
    if (kept && positions < 2 * run->language_length) positions = 2 * run->language_length;
    if (positions > (size_t)m->config.text.max_positions) positions = (size_t)m->config.text.max_positions;
    llama_state *state = NULL;
    glimpse_status status = llama_state_create(&m->text, beams, positions, step, &state);
    if (status) return status;
    if (kept) llama_state_keep(&m->text, state, run->language, kept);
    llama_state_free(run->language);
    run->language = state;
    run->language_beams = beams, run->language_length = positions, run->language_step = step;
    return GLIMPSE_STATUS_OK;
}

/* run->keys[length]: the merged sequence of prompt ids[count] with `images` pictures whose rows start at
 * starts[images] (llava_merge's), one key a position as run->held has them. */
static glimpse_status merged_keys(const llava_model *m, llava_run *run, const int32_t *ids, size_t count,
                                  const size_t *starts, size_t images, size_t length) {
    void *keys = run->keys;
    glimpse_status status = grow(&keys, &run->keys_capacity, length, sizeof *run->keys);
    run->keys = keys;
    if (status) return status;
    size_t rows = m->config.image_rows, next_id = 0, image = 0;
    for (size_t at = 0; at < length;) {
        if (image < images && at == starts[image]) {
            for (size_t r = 0; r < rows; r++) run->keys[at + r] = -1 - (int64_t)(image * rows + r);
            at += rows, image++;
            continue;
        }
        while (next_id < count && ids[next_id] == m->config.image_token_id) next_id++;
        run->keys[at++] = next_id < count ? ids[next_id++] : INT64_MIN;
    }
    return GLIMPSE_STATUS_OK;
}

/* Positions at the start of the merged sequence (run->keys[length]) that sequence 0 of the language state
 * already holds: the same tokens and the same pictures (pixel for pixel), at most length − 1 (the last
 * position's logits are the first step's). */
static size_t kept_positions(const llava_model *m, const llava_run *run, size_t images, size_t length) {
    if (!run->language || !run->held_count || !length) return 0;
    size_t side = (size_t)m->config.vision.image_size, each = 3 * side * side, same = 0;
    while (same < images && same < run->held_images &&
           memcmp(run->pixels + same * each, run->held_pixels + same * each, each * sizeof(float)) == 0)
        same++;
    size_t limit = run->held_count < length - 1 ? run->held_count : length - 1, kept = 0;
    for (; kept < limit && run->keys[kept] == run->held[kept]; kept++)
        if (run->keys[kept] < 0 && (size_t)(-1 - run->keys[kept]) / m->config.image_rows >= same) break;
    return kept;
}

/* After a search of one sequence: what the language state now holds (the merged sequence and the generated
 * ids it has read) is what the next call may continue from. */
static glimpse_status hold(const llava_model *m, llava_run *run, size_t images, size_t length,
                           const int32_t *generated, size_t generated_count) {
    size_t filled = run->language->length, side = (size_t)m->config.vision.image_size, each = 3 * side * side;
    run->held_count = 0;
    if (filled < length || filled - length > generated_count) return GLIMPSE_STATUS_OK;
    void *held = run->held, *pixels = run->held_pixels;
    glimpse_status status = grow(&held, &run->held_capacity, filled, sizeof *run->held);
    run->held = held;
    if (!status) status = grow(&pixels, &run->held_pixel_capacity, images ? images : 1, each * sizeof(float));
    run->held_pixels = pixels;
    if (status) return status;
    memcpy(run->held, run->keys, length * sizeof *run->held);
    for (size_t i = length; i < filled; i++) run->held[i] = generated[i - length];
    memcpy(run->held_pixels, run->pixels, images * each * sizeof(float));
    run->held_count = filled, run->held_images = images;
    return GLIMPSE_STATUS_OK;
}

/* ------------------------------------------------------------------ one picture */

typedef struct llava_stream {
    const glimpse_model *model;
    const glimpse_caption_params *params;
    size_t image, count;
    int32_t *ids; /* the new ids so far */
} llava_stream;

static int stream_token(void *user, int32_t id) {
    llava_stream *s = user;
    s->ids[s->count++] = id;
    char *text = NULL;
    if (decode(s->model, s->ids, s->count, &text)) return 1;
    int stop = s->params->on_token(s->params->user, s->image, id, text);
    free(text);
    return stop;
}

static caption_settings settings_of(const llava_parts *parts, const glimpse_caption_params *p, size_t prompt_length) {
    caption_settings s = caption_settings_of(p, prompt_length, parts->end_ids[0], parts->end_ids[0]);
    s.score_generated = true; /* transformers 4.40's beam scores */
    for (size_t i = 1; i < parts->end_count; i++) s.more_end_ids[s.more_end_count++] = parts->end_ids[i];
    return s;
}

/* The pictures' projected features for those whose rows are not all among the kept positions (their rows start
 * at starts[]), merged with the prompt's embeddings into run->rows. */
static glimpse_status features_and_rows(glimpse_context *ctx, llava_run *run, size_t count, const int32_t *prompt,
                                        size_t prompt_length, const size_t *starts, size_t kept) {
    const llava_model *m = &parts_of(ctx->model)->model;
    size_t side = (size_t)m->config.vision.image_size, rows = m->config.image_rows;
    size_t hidden = (size_t)m->config.text.hidden_size, first = 0;
    while (first < count && starts[first] + rows <= kept) first++;
    if (first) memset(run->features, 0, first * rows * hidden * sizeof(float)); /* rows already read */
    glimpse_status status = GLIMPSE_STATUS_OK;
    if (first < count)
        status = llava_image_features(m, run->vision, run->pixels + first * 3 * side * side, count - first,
                                      run->features + first * rows * hidden, ctx->threads);
    return status ? status : llava_merge(m, prompt, prompt_length, run->features, count, run->rows, NULL);
}

/* The vision tower's activations given back once the features are merged, and the pages of its mapped weights, so
 * that the language model's prompt runs beside its own weights and state alone, not the tower's too (the next call
 * makes the activations again and maps the weights' pages again from the page cache: milliseconds beside the
 * tower's seconds; an int8 tower's twins are copies, which stay). The pixels stay: hold() keeps them for the next
 * call's comparison. */
static void release_vision(glimpse_context *ctx, llava_run *run) {
    weight_store_release_prefix(ctx->model->store, parts_of(ctx->model)->model.vision_names);
    llava_vision_state_free(run->vision);
    run->vision = NULL;
    run->images = 0; /* run_of makes every buffer of the image side again */
}

/* The merged sequence of the prompt's ids and the pictures: its length, the pictures preprocessed into
 * run->pixels, its keys, and the positions the language state already holds. */
static glimpse_status prepare(glimpse_context *ctx, llava_run *run, glimpse_image *const *images, size_t count,
                              const int32_t *prompt, size_t prompt_length, const glimpse_caption_params *p,
                              size_t *length, size_t *kept, size_t **starts) {
    const llava_model *m = &parts_of(ctx->model)->model;
    size_t side = (size_t)m->config.vision.image_size;
    glimpse_status status = llava_merged_length(m, prompt, prompt_length, count, length);
    if (!status && *length + (size_t)p->max_tokens > (size_t)m->config.text.max_positions + 1)
        status = error_set(GLIMPSE_STATUS_TOO_LARGE, "the prompt's %zu positions and %d new tokens are more than the "
                           "language model's %d", *length, p->max_tokens, m->config.text.max_positions);
    for (size_t i = 0; i < count && !status; i++)
        status = preprocess_image(run->pixels + i * 3 * side * side, images[i], &ctx->model->preprocess);
    if (!status && !(*starts = malloc((count ? count : 1) * sizeof **starts))) status = ERROR_OOM();
    void *rows = run->rows;
    if (!status) status = grow(&rows, &run->rows_capacity, *length, (size_t)m->config.text.hidden_size * sizeof(float));
    run->rows = rows;
    /* the merge's image positions (the rows themselves are made again once the features are known) */
    if (!status) status = llava_merge(m, prompt, prompt_length, run->features, count, run->rows, *starts);
    if (!status) status = merged_keys(m, run, prompt, prompt_length, *starts, count, *length);
    if (!status) *kept = kept_positions(m, run, count, *length);
    return status;
}

/* The prompt's ids through the search, from the pictures' features merged in (the positions a previous call left
 * in the language state kept); the new ids, the prompt and its ids into out. `index` numbers the answer in the
 * streamed tokens. */
static glimpse_status answer(glimpse_context *ctx, glimpse_image *const *images, size_t count, size_t index,
                             const char *prompt_text, const int32_t *prompt, size_t prompt_length,
                             const glimpse_caption_params *p, glimpse_caption *out) {
    const llava_parts *parts = parts_of(ctx->model);
    const llava_model *m = &parts->model;
    llava_run *run = NULL;
    size_t length = 0, kept = 0, got = 0, max_length = prompt_length + (size_t)p->max_tokens, *starts = NULL;
    glimpse_status status = run_of(ctx, count, &run);
    if (!status) status = prepare(ctx, run, images, count, prompt, prompt_length, p, &length, &kept, &starts);
    if (run) run->held_count = 0; /* until this search ends well */
    /* the tower's activations are given back before the language state is made: never both at once */
    if (!status) status = features_and_rows(ctx, run, count, prompt, prompt_length, starts, kept);
    if (!status) release_vision(ctx, run);
    if (!status) status = room_for(m, run, (size_t)p->beams, length + (size_t)p->max_tokens, length - kept, kept);
    int32_t *ids = status ? NULL : malloc(max_length * sizeof *ids);
    llava_stream stream = {ctx->model, p, index, 0, ids ? malloc(max_length * sizeof *ids) : NULL};
    if (!status && (!ids || !stream.ids)) status = ERROR_OOM();
    if (!status) {
        llama_decoder self = {&m->text, run->language, run->rows + kept * (size_t)m->config.text.hidden_size,
                              length - kept, prompt_length, kept};
        caption_decoder decoder = llama_caption_decoder(&self);
        caption_settings settings = settings_of(parts, p, prompt_length);
        status = caption_generate(&decoder, prompt, prompt_length, &settings, p->on_token ? stream_token : NULL,
                                  &stream, ids, &got, ctx->threads);
    }
    free(stream.ids), free(starts);
    if (!status) { /* the generated ids alone */
        memmove(ids, ids + prompt_length, (got - prompt_length) * sizeof *ids);
        out->ids = ids, out->id_count = got - prompt_length;
        out->prompt_positions = length, out->cached_positions = kept;
        for (size_t i = 0; i < parts->end_count && out->id_count; i++)
            out->ended |= out->ids[out->id_count - 1] == parts->end_ids[i];
        if (p->beams == 1) status = hold(m, run, count, length, out->ids, out->id_count);
        if (!status) status = decode(ctx->model, out->ids, out->id_count, &out->text);
        out->prompt = status ? NULL : strdup(prompt_text ? prompt_text : "");
        out->prompt_ids = status ? NULL : malloc((prompt_length ? prompt_length : 1) * sizeof *out->prompt_ids);
        if (!status && (!out->prompt || !out->prompt_ids)) status = ERROR_OOM();
        if (!status) memcpy(out->prompt_ids, prompt, prompt_length * sizeof *prompt), out->prompt_id_count = prompt_length;
    } else {
        free(ids);
    }
    return status;
}

/* params->prompt verbatim (its <image> marks the picture), or the caption instruction in the chat template. */
static glimpse_status caption_images(glimpse_context *ctx, glimpse_image *const *images, size_t count,
                                     const glimpse_caption_params *p, glimpse_caption *out) {
    const llava_parts *parts = parts_of(ctx->model);
    char *rendered = NULL;
    int32_t *prompt = NULL;
    size_t length = 0;
    glimpse_status status = p->prompt ? GLIMPSE_STATUS_OK
                                      : render_turn(ctx->model, 1, LLAVA_CAPTION_INSTRUCTION, &rendered);
    if (!status) status = encode(parts, p->prompt ? p->prompt : rendered, &prompt, &length);
    for (size_t i = 0; i < count && !status; i++) {
        status = answer(ctx, &images[i], 1, i, p->prompt ? p->prompt : rendered, prompt, length, p, &out[i]);
        if (!status) status = context_progress(ctx, i + 1, count);
    }
    if (status)
        for (size_t i = 0; i < count; i++) glimpse_caption_free(&out[i]);
    free(rendered), free(prompt);
    return status;
}

static glimpse_status answer_together(glimpse_context *ctx, glimpse_image *const *images, size_t count,
                                      const char *question, const glimpse_caption_params *p, glimpse_caption *out) {
    char *rendered = NULL;
    int32_t *prompt = NULL;
    size_t length = 0;
    glimpse_status status = question ? render_turn(ctx->model, count, question, &rendered) : GLIMPSE_STATUS_OK;
    if (!status) status = encode(parts_of(ctx->model), question ? rendered : p->prompt, &prompt, &length);
    if (!status) status = answer(ctx, images, count, 0, question ? rendered : p->prompt, prompt, length, p, out);
    if (status) glimpse_caption_free(out);
    free(rendered), free(prompt);
    return status;
}

/* The conversation in the chat template, the assistant's turn opened, and its pictures in the order the
 * template puts them (each message's pictures before its text); *images and *prompt are the caller's. */
static glimpse_status render_conversation(const glimpse_model *model, const glimpse_chat_message *messages,
                                          size_t count, glimpse_image ***images, size_t *image_count, char **prompt) {
    const llava_parts *parts = parts_of(model);
    size_t total = 0;
    for (size_t i = 0; i < count; i++) total += messages[i].part_count;
    chat_message *rendered = calloc(count ? count : 1, sizeof *rendered);
    chat_part *all = calloc(total ? total : 1, sizeof *all);
    *images = calloc(total ? total : 1, sizeof **images), *image_count = 0, *prompt = NULL;
    glimpse_status status = rendered && all && *images ? GLIMPSE_STATUS_OK : ERROR_OOM();
    if (!status && parts->template_error[0])
        status = error_set(GLIMPSE_STATUS_UNSUPPORTED, "%s: a conversation needs the checkpoint's chat template",
                           parts->template_error);
    for (size_t i = 0, at = 0; i < count && !status; i++) {
        rendered[i] = (chat_message){messages[i].role, all + at, messages[i].part_count};
        for (size_t j = 0; j < messages[i].part_count; j++, at++) /* images first, in order, as rendered */
            if (messages[i].parts[j].image) all[at] = (chat_part){CHAT_PART_IMAGE, NULL};
            else all[at] = (chat_part){CHAT_PART_TEXT, messages[i].parts[j].text};
        for (size_t j = 0; j < messages[i].part_count; j++)
            if (messages[i].parts[j].image) (*images)[(*image_count)++] = messages[i].parts[j].image;
    }
    if (!status) status = chat_template_render(parts->template, rendered, count, 1, prompt);
    free(rendered), free(all);
    return status;
}

static glimpse_status chat(glimpse_context *ctx, const glimpse_chat_message *messages, size_t count,
                           const glimpse_caption_params *p, glimpse_caption *out) {
    glimpse_image **images = NULL;
    size_t image_count = 0, length = 0;
    char *rendered = NULL;
    int32_t *prompt = NULL;
    glimpse_status status = render_conversation(ctx->model, messages, count, &images, &image_count, &rendered);
    if (!status) status = encode(parts_of(ctx->model), rendered, &prompt, &length);
    if (!status) status = answer(ctx, images, image_count, 0, rendered, prompt, length, p, out);
    free(images), free(rendered), free(prompt);
    return status;
}

/* What generate's output starts with (the family's captions carry only the new ids; kept for the table). */
static glimpse_status prompt_ids(const glimpse_model *model, const char *prompt, int32_t **ids, size_t *count) {
    return encode(parts_of(model), prompt ? prompt : "", ids, count);
}

static size_t max_positions(const glimpse_model *model) {
    return (size_t)parts_of(model)->model.config.text.max_positions + 1;
}

static const family_captioner captioner = {
    .max_tokens = LLAVA_MAX_NEW_TOKENS,
    .min_tokens = 0,
    .beams = 1,
    .decode = decode,
    .prompt_ids = prompt_ids,
    .max_positions = max_positions,
    .vision_attentions = "vision_attentions",
    .caption_images = caption_images,
    .question_prompt = question_prompt,
    .answer_together = answer_together,
    .chat = chat,
};

/* ------------------------------------------------------------------ explain */

/* The language model's attention is what a word's map reads; the picture's rows are its patches on the tower's
 * grid (CLIP's class row, where "full" keeps it, before them). */
static void explain_shape(const glimpse_model *model, family_explain_shape *out) {
    const llava_config *c = &parts_of(model)->model.config;
    int side = c->vision.image_size / c->vision.patch_size;
    *out = (family_explain_shape){(size_t)c->text.layers, (size_t)c->text.heads, side, side,
                                  side * c->vision.patch_size};
}

/* The prompt's merged rows (`length` of them), then the embeddings of ids [id_count], into *rows (new); the first
 * image's first row in *image_start. */
static glimpse_status explain_rows(glimpse_context *ctx, glimpse_image *const *images, size_t count,
                                   const int32_t *prompt, size_t prompt_length, size_t length, const int32_t *ids,
                                   size_t id_count, float **rows, size_t *image_start) {
    const llava_model *m = &parts_of(ctx->model)->model;
    size_t side = (size_t)m->config.vision.image_size, hidden = (size_t)m->config.text.hidden_size;
    llava_vision_state *vision = NULL;
    float *pixels = memory_large((count ? count : 1) * 3 * side * side * sizeof(float));
    float *features = memory_large((count ? count : 1) * m->config.image_rows * hidden * sizeof(float));
    size_t *starts = calloc(count ? count : 1, sizeof *starts);
    glimpse_status status = pixels && features && starts ? GLIMPSE_STATUS_OK : ERROR_OOM();
    if (!status && !(*rows = memory_large((length + id_count) * hidden * sizeof(float)))) status = ERROR_OOM();
    for (size_t i = 0; i < count && !status; i++)
        status = preprocess_image(pixels + i * 3 * side * side, images[i], &ctx->model->preprocess);
    if (!status && count) status = llava_vision_state_create(m, count, &vision);
    if (!status && count) status = llava_image_features(m, vision, pixels, count, features, ctx->threads);
    if (!status) status = llava_merge(m, prompt, prompt_length, features, count, *rows, starts);
    if (!status) status = llama_embed(&m->text, ids, id_count, *rows + length * hidden);
    if (!status) *image_start = starts[0];
    llava_vision_state_free(vision);
    free(pixels), free(features), free(starts);
    return status;
}

/* The language model over the merged prompt and the answer's ids, its self-attention recorded: every position's
 * (everything), else only the rows from the prompt's last position on (a step of their own after the rest of the
 * prompt: llava-1.5's 576 picture rows make the whole square large); the row before a new id chose it, the first
 * picture's patch columns are the map's. */
static glimpse_status explain_record(glimpse_context *ctx, glimpse_image *const *images, size_t count,
                                     const char *prompt, const char *tokenized, const int32_t *ids, size_t id_count,
                                     family_explain_pass *pass) {
    const llava_parts *parts = parts_of(ctx->model);
    const llava_model *m = &parts->model;
    char *rendered = NULL;
    int32_t *prompt_ids = NULL;
    float *rows = NULL;
    llama_state *state = NULL;
    size_t prompt_length = 0, length = 0, image_start = 0, layers = (size_t)m->config.text.layers;
    if (tokenized) prompt = tokenized; /* the search's own text */
    glimpse_status status = prompt ? GLIMPSE_STATUS_OK
                                   : render_turn(ctx->model, count, LLAVA_CAPTION_INSTRUCTION, &rendered);
    if (!status) status = encode(parts, prompt ? prompt : rendered, &prompt_ids, &prompt_length);
    if (!status) status = llava_merged_length(m, prompt_ids, prompt_length, count, &length);
    /* an answer that filled the positions: its last id chose nothing and has no position to run at */
    if (!status && id_count && length + id_count > (size_t)m->config.text.max_positions) id_count--;
    if (!status)
        status = explain_rows(ctx, images, count, prompt_ids, prompt_length, length, ids, id_count, &rows,
                              &image_start);
    size_t total = length + id_count, patches = (size_t)m->vision.patches_per_side * m->vision.patches_per_side;
    size_t from = pass->everything || !length ? 0 : length - 1, hidden = (size_t)m->config.text.hidden_size;
    uint64_t recorded = pass->everything ? explain_all_layers(layers) : pass->map_layers;
    if (!status)
        status = explain_record_make(&pass->records[0], recorded, 0, (size_t)m->config.text.heads, total - from,
                                     total, 0);
    if (!status) status = llama_state_create(&m->text, 1, total, total, &state);
    if (!status && from) status = llama_forward(&m->text, state, rows, 1, from, ctx->threads);
    if (!status) {
        state->record = &pass->records[0], state->record_from = from;
        status = llama_forward(&m->text, state, rows + from * hidden, 1, total - from, ctx->threads);
    }
    pass->names[0][ATTENTION_KIND_SELF] = "self_attentions";
    pass->map_record = 0, pass->map_kind = ATTENTION_KIND_SELF;
    pass->row_shift = (long)length - 1 - (long)from;
    pass->first_column = image_start + (m->config.image_rows - patches);
    pass->first_word = 0;
    llama_state_free(state);
    free(rendered), free(prompt_ids), free(rows);
    return status;
}

static const family_explainer explainer = {.shape = explain_shape, .record = explain_record};

/* ------------------------------------------------------------------ bench hooks (api/bench_stages.h) */

/* The image side: preprocessing, the tower up to its feature layer, the projector. */
static glimpse_status bench_image(glimpse_context *ctx, glimpse_image *const *images, size_t count, double *flops) {
    const llava_model *m = &parts_of(ctx->model)->model;
    const vit_config *v = &m->config.vision;
    llava_run *run = NULL;
    size_t side = (size_t)v->image_size;
    glimpse_status status = run_of(ctx, count, &run);
    for (size_t i = 0; i < count && !status; i++)
        status = preprocess_image(run->pixels + i * 3 * side * side, images[i], &ctx->model->preprocess);
    if (!status) status = llava_image_features(m, run->vision, run->pixels, count, run->features, ctx->threads);
    double t = (double)m->vision.tokens, h = v->hidden_size, inter = v->intermediate_size;
    double patches = (double)(m->vision.patches_per_side * m->vision.patches_per_side);
    double layer = 2 * t * (4 * h * h + 2 * h * inter) + 4 * t * t * h, text = m->config.text.hidden_size;
    double projector = 2 * (double)m->config.image_rows * (h * text + text * text);
    *flops = (double)count * (v->layers * layer + 2 * patches * 3 * v->patch_size * v->patch_size * h + projector);
    return status;
}

/* The language model over `rows` positions after `position` (a fixed pattern of embeddings: the time does not
 * depend on them). */
static glimpse_status bench_decode(glimpse_context *ctx, size_t position, size_t rows, double *flops) {
    const llava_model *m = &parts_of(ctx->model)->model;
    const llama_config *c = &m->config.text;
    llava_run *run = NULL;
    size_t hidden = (size_t)c->hidden_size;
    if (!rows || position + rows > (size_t)c->max_positions)
        return error_set(GLIMPSE_STATUS_TOO_LARGE, "%zu positions after %zu: the language model holds %d", rows,
                         position, c->max_positions);
    glimpse_status status = run_of(ctx, 0, &run);
    void *buffer = run ? run->rows : NULL;
    if (!status) status = grow(&buffer, &run->rows_capacity, rows, hidden * sizeof(float));
    if (run) run->rows = buffer;
    if (!status) status = room_for(m, run, 1, position + rows, rows, 0);
    if (status) return status;
    run->held_count = 0; /* the cache is overwritten */
    for (size_t i = 0; i < rows * hidden; i++) run->rows[i] = 0.01f * (float)(i % 17) - 0.08f;
    run->language->length = position;
    double h = hidden, d = c->head_dim, q = c->heads * d, kv = c->kv_heads * d, inter = c->intermediate_size;
    double r = (double)rows, keys = (double)(position + rows);
    *flops = c->layers * (2 * r * (h * q + 2 * h * kv + q * h + 3 * h * inter) + 4 * r * keys * q) +
             2 * h * c->vocab_size;
    return llama_forward(&m->text, run->language, run->rows, 1, rows, ctx->threads);
}

static double weight_bytes(const kernel_weight *w, double out, double in) {
    if (w->q8) return out * ((double)w->q8->depth + 8);
    return out * in * (double)weight_type_bytes(w->type);
}

/* Every layer's projections and the head, as stored (or their int8 twins and scales). */
static double bench_step_bytes(const glimpse_model *model) {
    const llama_model *m = &parts_of(model)->model.text;
    const llama_config *c = &m->config;
    double h = c->hidden_size, d = c->head_dim, q = c->heads * d, kv = c->kv_heads * d, inter = c->intermediate_size;
    double bytes = weight_bytes(&m->lm_head, c->vocab_size, h);
    for (int l = 0; l < c->layers; l++) {
        const llama_layer *layer = &m->layers[l];
        bytes += weight_bytes(&layer->q_weight, q, h) + weight_bytes(&layer->k_weight, kv, h) +
                 weight_bytes(&layer->v_weight, kv, h) + weight_bytes(&layer->o_weight, h, q) +
                 weight_bytes(&layer->gate_weight, inter, h) + weight_bytes(&layer->up_weight, inter, h) +
                 weight_bytes(&layer->down_weight, h, inter);
    }
    return bytes;
}

static size_t bench_image_rows(const glimpse_model *model) { return parts_of(model)->model.config.image_rows; }

static const family_bench bench = {bench_image, bench_decode, bench_step_bytes, bench_image_rows};

static void vision_info(const glimpse_model *model, glimpse_model_info *out) {
    const vit_config *v = &parts_of(model)->model.config.vision;
    out->image_size = v->image_size, out->patch_size = v->patch_size;
    out->vision_hidden_size = v->hidden_size, out->vision_layers = parts_of(model)->model.config.vision_layers;
    out->vision_heads = v->heads, out->vision_activation = v->act_name;
}

static void text_info(const glimpse_model *model, glimpse_model_info *out) {
    const llama_config *t = &parts_of(model)->model.config.text;
    loader_text_info(out, t->hidden_size, t->layers, t->heads, t->max_positions, t->vocab_size, "silu");
}

const model_family family_llava = {
    .architecture = "LlavaForConditionalGeneration",
    .summary = "LlavaForConditionalGeneration (LLaVA: CLIP or SigLIP with Llama or Qwen2)",
    .model_type = "llava",
    .description = "LLaVA: a CLIP or SigLIP tower, a projector and a Llama or Qwen2 language model; answers and "
                   "captions",
    .kind = GLIMPSE_MODEL_KIND_LLAVA,
    .capabilities = FAMILY_CAN(GLIMPSE_CAPABILITY_CAPTION) | FAMILY_CAN(GLIMPSE_CAPABILITY_ASK) |
                    FAMILY_CAN(GLIMPSE_CAPABILITY_CHAT) | FAMILY_CAN(GLIMPSE_CAPABILITY_EXPLAIN),
    .vision_section = "vision_config",
    .text_section = "text_config",
    .sections_required = true,
    .load = load_llava,
    .vision_info = vision_info,
    .text_info = text_info,
    .caption = &captioner,
    .quantize = quantize,
    .free_parts = free_parts,
    .free_run = free_run,
    .explain = &explainer,
    .bench = &bench,
};
