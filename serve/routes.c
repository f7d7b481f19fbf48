/* routes.c — what each endpoint of glimpse serve does with a request whose
 * body has arrived: read its inputs (JSON, an image body, multipart parts),
 * choose the model, hand the work to the model's queue, and write the JSON
 * answer or {"error": message}. Images come only from request bodies: no
 * path a client names is ever opened. */
#define _GNU_SOURCE /* qsort_r */
#include <cjson/cJSON.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "serve/internal.h"
#include "output/explain_json.h"
#include "output/json.h"

#define SEARCH_MAX_K 1000
#define QUERY_MAX_BYTES 4096
#define CAPTION_MAX_TOKENS 500

/* ------------------------------------------------------------- replies */

/* Makes every string in json valid UTF-8, as json_string writes strings (cJSON copies bytes as they are):
 * a file name or a query that is not UTF-8 keeps U+FFFD for its stray bytes. False when out of memory. */
static bool repair_strings(cJSON *json) {
    for (cJSON *item = json; item; item = item->next) {
        if (cJSON_IsString(item) && item->valuestring && !json_utf8_valid(item->valuestring)) {
            char *repaired = json_utf8_repaired(item->valuestring);
            bool set = repaired && cJSON_SetValuestring(item, repaired);
            free(repaired);
            if (!set) return false;
        }
        if (item->child && !repair_strings(item->child)) return false;
    }
    return true;
}

void route_reply_json(serve_reply *reply, int status, cJSON *root) {
    char *body = root && repair_strings(root) ? cJSON_PrintUnformatted(root) : NULL;
    cJSON_Delete(root);
    if (!body) {
        reply_error(reply, 503, "out of memory");
        reply->retry_after = 1;
        return;
    }
    reply->status = status;
    reply->body = body;
    reply->size = strlen(body);
    reply->content_type = "application/json";
}

/* reply = the malloc'd body, 200. */
static void reply_body(serve_reply *reply, char *body, size_t size, const char *content_type) {
    reply->status = 200;
    reply->body = body;
    reply->size = size;
    reply->content_type = content_type;
}

static void reply_text(serve_reply *reply, const char *content_type, const char *text) {
    reply->status = 200;
    reply->body = strdup(text);
    reply->size = reply->body ? strlen(text) : 0;
    reply->content_type = content_type;
}

/* The HTTP status of a library failure. */
int route_status_of(glimpse_status status) {
    switch (status) {
    case GLIMPSE_STATUS_INVALID_ARGUMENT:
    case GLIMPSE_STATUS_BAD_FORMAT:
    case GLIMPSE_STATUS_WRONG_MODEL: return 400;
    case GLIMPSE_STATUS_NOT_FOUND: return 404;
    case GLIMPSE_STATUS_TOO_LARGE: return 413;
    case GLIMPSE_STATUS_UNSUPPORTED: return 415;
    case GLIMPSE_STATUS_OUT_OF_MEMORY:
    case GLIMPSE_STATUS_BUSY: return 503;
    default: return 500;
    }
}

static cJSON *float_array(const float *values, size_t count) {
    cJSON *array = cJSON_CreateArray();
    for (size_t i = 0; array && i < count; i++) {
        cJSON *number = cJSON_CreateNumber(values[i]);
        if (!number) {
            cJSON_Delete(array);
            return NULL;
        }
        cJSON_AddItemToArray(array, number);
    }
    return array;
}

/* -------------------------------------------------------------- models */

/* What each capability lets a model answer, for the errors (glimpse_model_kind_can says which kinds can). */
static const char *const capability_verbs[] = {[GLIMPSE_CAPABILITY_EMBED] = "embed",
                                               [GLIMPSE_CAPABILITY_RANK] = "rank",
                                               [GLIMPSE_CAPABILITY_CAPTION] = "caption",
                                               [GLIMPSE_CAPABILITY_ASK] = "answer questions",
                                               [GLIMPSE_CAPABILITY_EXPLAIN] = "explain",
                                               [GLIMPSE_CAPABILITY_TASK] = "run tasks (OCR, objects, regions)",
                                               [GLIMPSE_CAPABILITY_CHAT] = "converse (chat completions)"};

static bool model_can(const serve_model *model, glimpse_capability what) {
    return glimpse_model_kind_can(model->info.kind, what);
}

static serve_model *find_model(serve_server *server, const char *name) {
    for (size_t i = 0; i < server->model_count; i++)
        if (strcmp(server->models[i].name, name) == 0) return &server->models[i];
    return NULL;
}

/* The model named (or, name NULL, the first loaded that can do it); NULL with the reply set. */
serve_model *route_choose_model(serve_server *server, const char *name, glimpse_capability what, serve_reply *reply) {
    if (name) {
        serve_model *model = find_model(server, name);
        if (!model) {
            reply_error(reply, 404, "no model named '%s' is loaded (GET /v1/models lists them)", name);
            return NULL;
        }
        if (!model_can(model, what)) {
            reply_error(reply, 400, "%s is a %s model: it cannot %s", name, model->info.architecture,
                        capability_verbs[what]);
            return NULL;
        }
        return model;
    }
    for (size_t i = 0; i < server->model_count; i++)
        if (model_can(&server->models[i], what)) return &server->models[i];
    reply_error(reply, 501, "no model loaded here can %s", capability_verbs[what]);
    return NULL;
}

/* ---------------------------------------------------------------- work */

/* Runs job on model's worker and waits for it; false with the reply set
 * (503 and Retry-After when too many requests are waiting already). */
bool route_run_job(serve_server *server, serve_request *request, serve_model *model, serve_job *job,
                    serve_reply *reply) {
    if (request->counted_as_image) { /* its image has arrived */
        request->counted_as_image = false;
        atomic_fetch_sub(&server->load.images_arriving, 1);
    }
    if (!queue_submit(&model->queue, job)) {
        reply_error(reply, 503, "busy: %zu requests are waiting already; try again shortly", server->load.limit);
        reply->retry_after = 1;
        return false;
    }
    queue_wait(&model->queue, job);
    if (job->status) {
        reply_error(reply, route_status_of(job->status), "%s", job->error);
        return false;
    }
    return true;
}

/* The bytes of the image sent: the body, or the first multipart part named image. */
static const serve_part *image_part(const serve_request *request) {
    for (size_t i = 0; i < request->part_count; i++)
        if (strcmp(request->parts[i].name, "image") == 0) return &request->parts[i];
    return NULL;
}

bool route_decode_image(serve_server *server, const char *bytes, size_t size, glimpse_image **image,
                         serve_reply *reply) {
    if (!size) {
        reply_error(reply, 400, "the image is empty");
        return false;
    }
    glimpse_image_params params = glimpse_image_default_params();
    params.max_pixels = server->config.max_pixels;
    glimpse_status status = glimpse_image_load_memory(bytes, size, &params, image);
    if (status) {
        int http = status == GLIMPSE_STATUS_TOO_LARGE ? 413 : 400; /* a cut picture and a non-picture alike */
        reply_error(reply, http, "not an image glimpse can read: %s", glimpse_last_error());
        return false;
    }
    return true;
}

/* The request's one image (the body, or its part named image); false with the reply set. */
static bool request_image(serve_server *server, const serve_request *request, glimpse_image **image,
                          serve_reply *reply) {
    if (request->kind == SERVE_BODY_IMAGE) return route_decode_image(server, request->body, request->size, image, reply);
    const serve_part *part = image_part(request);
    if (!part) {
        reply_error(reply, 400, "no image: send it as the body (image/...) or as a multipart part named image");
        return false;
    }
    return route_decode_image(server, part->data, part->size, image, reply);
}

typedef struct text_work {
    const char *text;
    float *embedding;
} text_work;

static glimpse_status embed_text(serve_job *job, glimpse_context *ctx) {
    text_work *work = job->data;
    return glimpse_embed_texts(ctx, &work->text, 1, work->embedding);
}

/* Embeds text, or else image, with model into embedding (dim floats); false with the reply set. */
static bool embed_one(serve_server *server, serve_request *request, serve_model *model, const char *text,
                      glimpse_image *image, float *embedding, serve_reply *reply) {
    text_work work = {text, embedding};
    serve_job job = {0};
    if (text) {
        job.run = embed_text;
        job.data = &work;
    } else {
        job.image = image;
        job.embedding = embedding;
    }
    return route_run_job(server, request, model, &job, reply);
}

/* A JSON body parsed (an object); NULL with the reply set. */
static cJSON *parse_json(const serve_request *request, serve_reply *reply) {
    cJSON *json = request->body ? cJSON_ParseWithLength(request->body, request->size) : NULL;
    if (!cJSON_IsObject(json)) {
        cJSON_Delete(json);
        reply_error(reply, 400, "malformed JSON: the body must be a JSON object");
        return NULL;
    }
    return json;
}

/* A string member of a JSON object: false with the reply set when present but not a string. */
static bool json_string_member(const cJSON *json, const char *name, const char **value, serve_reply *reply) {
    const cJSON *item = cJSON_GetObjectItemCaseSensitive(json, name);
    *value = NULL;
    if (!item) return true;
    if (!cJSON_IsString(item)) {
        reply_error(reply, 400, "\"%s\" must be a string", name);
        return false;
    }
    *value = item->valuestring;
    return true;
}

/* ---------------------------------------------------------- /v1/embed */

static void answer_embed(serve_server *server, serve_request *request, serve_reply *reply) {
    const char *text = NULL, *name = request_argument(request, "model");
    cJSON *json = NULL;
    if (request->kind == SERVE_BODY_JSON) {
        if (!(json = parse_json(request, reply))) return;
        const char *json_name;
        if (!json_string_member(json, "text", &text, reply) || !json_string_member(json, "model", &json_name, reply))
            goto done;
        if (json_name) name = json_name;
        if (!text) {
            reply_error(reply, 400, "nothing to embed: a JSON body is {\"text\": ...}");
            goto done;
        }
    } else if (request->kind == SERVE_BODY_NONE) {
        reply_error(reply, 400, "nothing to embed: send an image as the body or a multipart part named image, "
                                "or {\"text\": ...}");
        return;
    } else if (request->kind == SERVE_BODY_MULTIPART && !image_part(request)) {
        text = request_argument(request, "text");
        if (!text) {
            reply_error(reply, 400, "nothing to embed: no part named image or text");
            return;
        }
    }
    serve_model *model = route_choose_model(server, name, GLIMPSE_CAPABILITY_EMBED, reply);
    if (!model) goto done;
    glimpse_image *image = NULL;
    if (!text && !request_image(server, request, &image, reply)) goto done;
    size_t dim = glimpse_model_embedding_dim(model->model);
    float *embedding = malloc(dim * sizeof(float));
    if (!embedding) {
        reply_error(reply, 503, "out of memory");
    } else if (embed_one(server, request, model, text, image, embedding, reply)) {
        cJSON *root = cJSON_CreateObject();
        cJSON_AddStringToObject(root, "model", model->name);
        cJSON_AddItemToObject(root, "embedding", float_array(embedding, dim));
        route_reply_json(reply, 200, root);
    }
    free(embedding);
    glimpse_image_free(image);
done:
    cJSON_Delete(json);
}

/* ------------------------------------------------------------ /v1/rank */

typedef struct rank_work {
    const serve_model *model;
    glimpse_image **images;
    const char **texts;
    size_t image_count, text_count;
    glimpse_match_mode mode;
    float *scores; /* image_count × text_count */
} rank_work;

static glimpse_status rank_images(serve_job *job, glimpse_context *ctx) {
    rank_work *work = job->data;
    if (model_can(work->model, GLIMPSE_CAPABILITY_MATCH))
        return glimpse_match(ctx, work->images, work->image_count, work->texts, work->text_count, work->mode,
                             work->scores);
    size_t dim = glimpse_model_embedding_dim(work->model->model);
    float *images = malloc(work->image_count * dim * sizeof(float)), *texts = malloc(work->text_count * dim * sizeof(float));
    glimpse_status status = images && texts ? GLIMPSE_STATUS_OK : GLIMPSE_STATUS_OUT_OF_MEMORY;
    if (!status) status = glimpse_embed_images(ctx, work->images, work->image_count, images);
    if (!status) status = glimpse_embed_texts(ctx, work->texts, work->text_count, texts);
    if (!status)
        status = glimpse_score(work->model->model, images, work->image_count, texts, work->text_count, work->scores);
    free(images), free(texts);
    return status;
}

static int compare_descending(const void *a, const void *b, void *scores_pointer) {
    const float *scores = scores_pointer;
    size_t i = *(const size_t *)a, j = *(const size_t *)b;
    if (scores[i] > scores[j]) return -1;
    if (scores[i] < scores[j]) return 1;
    return i < j ? -1 : i > j;
}

/* {"model", "scores": [[per text] per image], "rankings": [{"text", "results": [{"image", "score"}]}]} */
static void reply_ranking(serve_reply *reply, const serve_model *model, const rank_work *work) {
    cJSON *root = cJSON_CreateObject(), *scores = cJSON_AddArrayToObject(root, "scores");
    cJSON_AddStringToObject(root, "model", model->name);
    for (size_t i = 0; i < work->image_count; i++)
        cJSON_AddItemToArray(scores, float_array(work->scores + i * work->text_count, work->text_count));
    cJSON *rankings = cJSON_AddArrayToObject(root, "rankings");
    size_t order[SERVE_MAX_PARTS];
    float column[SERVE_MAX_PARTS];
    for (size_t t = 0; t < work->text_count; t++) {
        for (size_t i = 0; i < work->image_count; i++) order[i] = i, column[i] = work->scores[i * work->text_count + t];
        qsort_r(order, work->image_count, sizeof *order, compare_descending, column);
        cJSON *ranking = cJSON_CreateObject(), *results = cJSON_AddArrayToObject(ranking, "results");
        cJSON_AddStringToObject(ranking, "text", work->texts[t]);
        for (size_t r = 0; r < work->image_count; r++) {
            cJSON *result = cJSON_CreateObject();
            cJSON_AddNumberToObject(result, "image", (double)order[r]);
            cJSON_AddNumberToObject(result, "score", column[order[r]]);
            cJSON_AddItemToArray(results, result);
        }
        cJSON_AddItemToArray(rankings, ranking);
    }
    route_reply_json(reply, 200, root);
}

static void answer_rank(serve_server *server, serve_request *request, serve_reply *reply) {
    if (request->kind != SERVE_BODY_MULTIPART) {
        reply_error(reply, 400, "rank takes multipart/form-data: parts named image (files) and text (fields)");
        return;
    }
    glimpse_image *images[SERVE_MAX_PARTS] = {0};
    const char *texts[SERVE_MAX_PARTS];
    float scores[SERVE_MAX_PARTS * SERVE_MAX_PARTS];
    rank_work work = {.images = images, .texts = texts, .scores = scores, .mode = GLIMPSE_MATCH_MODE_ITM};
    const char *mode = request_argument(request, "mode");
    if (mode && strcmp(mode, "itc") != 0 && strcmp(mode, "itm") != 0) {
        reply_error(reply, 400, "mode is itm or itc, not '%s'", mode);
        return;
    }
    if (mode && strcmp(mode, "itc") == 0) work.mode = GLIMPSE_MATCH_MODE_ITC;
    for (size_t i = 0; i < request->part_count; i++) {
        const serve_part *part = &request->parts[i];
        if (strcmp(part->name, "text") == 0 && !part->filename) texts[work.text_count++] = part->data;
    }
    serve_model *model = route_choose_model(server, request_argument(request, "model"), GLIMPSE_CAPABILITY_RANK, reply);
    if (!model) return;
    for (size_t i = 0; i < request->part_count; i++) {
        const serve_part *part = &request->parts[i];
        if (strcmp(part->name, "image") != 0) continue;
        if (!route_decode_image(server, part->data, part->size, &images[work.image_count], reply)) goto done;
        work.image_count++;
    }
    if (!work.image_count || !work.text_count) {
        reply_error(reply, 400, "rank needs at least one part named image and one named text");
        goto done;
    }
    work.model = model;
    serve_job job = {.run = rank_images, .data = &work};
    if (route_run_job(server, request, model, &job, reply)) reply_ranking(reply, model, &work);
done:
    for (size_t i = 0; i < work.image_count; i++) glimpse_image_free(images[i]);
}

/* --------------------------------------------------------- /v1/caption */

/* A whole number argument in [minimum, maximum], if given; false with the reply set. */
static bool integer_argument(const serve_request *request, const char *name, long long minimum, long long maximum,
                             long long *value, serve_reply *reply) {
    const char *text = request_argument(request, name);
    if (!text) return true;
    char *end;
    errno = 0;
    long long parsed = strtoll(text, &end, 10);
    if (errno || end == text || *end || parsed < minimum || parsed > maximum) {
        reply_error(reply, 400, "%s takes a whole number from %lld to %lld", name, minimum, maximum);
        return false;
    }
    *value = parsed;
    return true;
}

static bool number_argument(const serve_request *request, const char *name, float minimum, float maximum,
                            float *value, serve_reply *reply) {
    const char *text = request_argument(request, name);
    if (!text) return true;
    char *end;
    float parsed = strtof(text, &end);
    if (end == text || *end || !(parsed >= minimum && parsed <= maximum)) {
        reply_error(reply, 400, "%s takes a number from %g to %g", name, minimum, maximum);
        return false;
    }
    *value = parsed;
    return true;
}

/* The caption options given (query string or form fields) over the model's own. */
static bool caption_options(const serve_request *request, const serve_model *model, glimpse_caption_params *params,
                            serve_reply *reply) {
    *params = glimpse_caption_default_params();
    params->prompt = request_argument(request, "prompt");
    long long beams = params->beams, max_tokens = params->max_tokens, min_tokens = params->min_tokens,
              top_k = params->top_k, seed = 0;
    const char *sample = request_argument(request, "sample");
    if (sample && strcmp(sample, "true") != 0 && strcmp(sample, "false") != 0 && strcmp(sample, "1") != 0 &&
        strcmp(sample, "0") != 0) {
        reply_error(reply, 400, "sample is true or false");
        return false;
    }
    params->sample = sample && (strcmp(sample, "true") == 0 || strcmp(sample, "1") == 0);
    if (!integer_argument(request, "beams", 1, GLIMPSE_CAPTION_MAX_BEAMS, &beams, reply) ||
        !integer_argument(request, "max_tokens", 1, CAPTION_MAX_TOKENS, &max_tokens, reply) ||
        !integer_argument(request, "min_tokens", 0, CAPTION_MAX_TOKENS, &min_tokens, reply) ||
        !integer_argument(request, "top_k", 0, 1 << 24, &top_k, reply) ||
        !integer_argument(request, "seed", 0, 0x7fffffffffffffffLL, &seed, reply) ||
        !number_argument(request, "temperature", 1e-3f, 100, &params->temperature, reply) ||
        !number_argument(request, "top_p", 1e-6f, 1, &params->top_p, reply) ||
        !number_argument(request, "repetition_penalty", 1e-3f, 100, &params->repetition_penalty, reply) ||
        !number_argument(request, "length_penalty", -10, 10, &params->length_penalty, reply))
        return false;
    params->beams = (int)beams, params->max_tokens = (int)max_tokens, params->min_tokens = (int)min_tokens;
    params->top_k = (int)top_k, params->seed = (uint64_t)seed;
    if (params->sample && params->beams != GLIMPSE_CAPTION_MODEL_DEFAULT && params->beams != 1) {
        reply_error(reply, 400, "sample draws one caption: beams must be 1 or left out");
        return false;
    }
    if (params->max_tokens != GLIMPSE_CAPTION_MODEL_DEFAULT && params->min_tokens > params->max_tokens) {
        reply_error(reply, 400, "min_tokens (%d) is more than max_tokens (%d)", params->min_tokens, params->max_tokens);
        return false;
    }
    /* as the CLI: a minimum above the model's own maximum is lowered to it */
    int model_max_tokens = glimpse_caption_model_params(model->model).max_tokens;
    if (params->max_tokens == GLIMPSE_CAPTION_MODEL_DEFAULT && params->min_tokens > model_max_tokens)
        params->min_tokens = model_max_tokens;
    return true;
}

typedef struct caption_work {
    glimpse_image *image;
    const glimpse_caption_params *params;
    const char *question; /* /v1/ask: the question; NULL for a caption */
    glimpse_caption caption;
} caption_work;

static glimpse_status caption_image(serve_job *job, glimpse_context *ctx) {
    caption_work *work = job->data;
    if (work->question) return glimpse_ask_images(ctx, &work->image, 1, work->question, work->params, &work->caption);
    return glimpse_caption_images(ctx, &work->image, 1, work->params, &work->caption);
}

/* /v1/caption's detail=1|2|3 (Florence-2's caption tasks, as glimpse caption --detail picks them; the model was
 * chosen for them) into params->prompt; false with the reply set. */
static bool caption_detail(const serve_request *request, glimpse_caption_params *params, serve_reply *reply) {
    static const char *const tasks[] = {"<CAPTION>", "<DETAILED_CAPTION>", "<MORE_DETAILED_CAPTION>"};
    const char *detail = request_argument(request, "detail");
    if (!detail) return true;
    if (strlen(detail) != 1 || detail[0] < '1' || detail[0] > '3') {
        reply_error(reply, 400, "detail is 1, 2 or 3 (a caption, a detailed one, a paragraph)");
        return false;
    }
    if (params->prompt) {
        reply_error(reply, 400, "detail picks the caption's prompt: drop prompt");
        return false;
    }
    params->prompt = tasks[detail[0] - '1'];
    return true;
}

/* /v1/caption, and /v1/ask (question: the `question` argument, answered with BLIP-2's prompt
 * "Question: {q} Answer:" as glimpse ask does). */
static void answer_caption(serve_server *server, serve_request *request, serve_reply *reply, bool ask) {
    const char *question = ask ? request_argument(request, "question") : NULL;
    if (ask && (!question || !question[0])) {
        reply_error(reply, 400, "/v1/ask needs a question (the question argument, in the query or the form)");
        return;
    }
    /* detail without a model named: the first that has Florence-2's caption tasks */
    glimpse_capability what = ask ? GLIMPSE_CAPABILITY_ASK
                              : request_argument(request, "detail") ? GLIMPSE_CAPABILITY_TASK
                                                                    : GLIMPSE_CAPABILITY_CAPTION;
    serve_model *model = route_choose_model(server, request_argument(request, "model"), what, reply);
    glimpse_caption_params params;
    if (!model || !caption_options(request, model, &params, reply) ||
        (!ask && !caption_detail(request, &params, reply)))
        return;
    caption_work work = {.params = &params, .question = question};
    if (!request_image(server, request, &work.image, reply)) return;
    serve_job job = {.run = caption_image, .data = &work};
    if (route_run_job(server, request, model, &job, reply)) {
        cJSON *root = cJSON_CreateObject();
        cJSON_AddStringToObject(root, "model", model->name);
        if (ask) cJSON_AddStringToObject(root, "question", question);
        cJSON_AddStringToObject(root, ask ? "answer" : "caption", work.caption.text);
        cJSON *ids = cJSON_AddArrayToObject(root, "ids");
        for (size_t i = 0; i < work.caption.id_count; i++)
            cJSON_AddItemToArray(ids, cJSON_CreateNumber(work.caption.ids[i]));
        route_reply_json(reply, 200, root);
    }
    glimpse_caption_free(&work.caption);
    glimpse_image_free(work.image);
}

/* A yes/no argument (true, false, 1, 0), if given; false with the reply set. */
static bool flag_argument(const serve_request *request, const char *name, bool *value, serve_reply *reply) {
    const char *text = request_argument(request, name);
    if (!text) return true;
    bool yes = strcmp(text, "true") == 0 || strcmp(text, "1") == 0;
    if (!yes && strcmp(text, "false") != 0 && strcmp(text, "0") != 0) {
        reply_error(reply, 400, "%s is true or false (1 or 0)", name);
        return false;
    }
    *value = yes;
    return true;
}

/* --------------------------------------------------------- /v1/task */

typedef struct task_work {
    glimpse_image *image;
    const char *task, *input;
    const float *region; /* x0, y0, x1, y1 in the picture's pixels, or NULL */
    const glimpse_caption_params *params;
    glimpse_task_result result;
} task_work;

static glimpse_status run_task(serve_job *job, glimpse_context *ctx) {
    task_work *work = job->data;
    char tokens[64];
    if (work->region) {
        glimpse_status status = glimpse_task_region(glimpse_image_width(work->image),
                                                    glimpse_image_height(work->image), work->region, tokens,
                                                    sizeof tokens);
        if (status) return status;
        work->input = tokens;
    }
    return glimpse_run_task(ctx, &work->image, 1, work->task, work->input, work->params, &work->result);
}

/* The region argument "X0,Y0,X1,Y1" in pixels, if given; false with the reply set. */
static bool region_argument(const serve_request *request, float region[4], bool *given, serve_reply *reply) {
    const char *text = request_argument(request, "region");
    *given = text != NULL;
    if (!text) return true;
    char *end = (char *)text;
    for (int i = 0; i < 4; i++) {
        const char *start = end + (i > 0);
        if (i > 0 && *end != ',') break;
        region[i] = strtof(start, &end);
        if (end == start || !isfinite(region[i])) break;
        if (i == 3 && !*end) return true;
    }
    reply_error(reply, 400, "region is X0,Y0,X1,Y1: four numbers, the picture's pixels");
    return false;
}

/* /v1/task: a Florence-2 task (the `task` argument as the model card names it, with `text` or `region` for the
 * tasks that take one) on the posted picture; the answer as glimpse task --json prints it. */
/* The task /v1/ocr and /v1/detect run, as glimpse ocr and detect pick it: regions=true (ocr); q=PHRASE
 * (detect: grounding, or open_vocabulary=true), dense=true, proposals=true. NULL with the reply set. */
static const char *named_task(const serve_request *request, serve_route route, const char **input,
                              serve_reply *reply) {
    bool regions = false, open = false, dense = false, proposals = false;
    if (!flag_argument(request, "regions", &regions, reply) || !flag_argument(request, "open_vocabulary", &open, reply) ||
        !flag_argument(request, "dense", &dense, reply) || !flag_argument(request, "proposals", &proposals, reply))
        return NULL;
    if (route == SERVE_ROUTE_OCR) return regions ? "<OCR_WITH_REGION>" : "<OCR>";
    *input = request_argument(request, "q");
    if (*input && (dense || proposals)) {
        reply_error(reply, 400, "dense and proposals take no phrase (q)");
        return NULL;
    }
    if (*input) return open ? "<OPEN_VOCABULARY_DETECTION>" : "<CAPTION_TO_PHRASE_GROUNDING>";
    return dense ? "<DENSE_REGION_CAPTION>" : proposals ? "<REGION_PROPOSAL>" : "<OD>";
}

static void answer_task(serve_server *server, serve_request *request, serve_reply *reply) {
    task_work work = {.task = request_argument(request, "task"), .input = request_argument(request, "text")};
    if (request->route != SERVE_ROUTE_TASK && !(work.task = named_task(request, request->route, &work.input, reply)))
        return;
    if (!work.task || !work.task[0]) {
        reply_error(reply, 400, "/v1/task needs a task, named as the model card names it (task=<OD>)");
        return;
    }
    float region[4];
    bool has_region;
    if (!region_argument(request, region, &has_region, reply)) return;
    if (has_region && work.input) {
        reply_error(reply, 400, "give text or region, not both");
        return;
    }
    work.region = has_region ? region : NULL;
    serve_model *model = route_choose_model(server, request_argument(request, "model"), GLIMPSE_CAPABILITY_TASK, reply);
    glimpse_caption_params params;
    if (!model || !caption_options(request, model, &params, reply)) return;
    if (params.prompt) {
        reply_error(reply, 400, "the task makes the prompt: give the phrase as text, or a region");
        return;
    }
    work.params = &params;
    if (!request_image(server, request, &work.image, reply)) return;
    serve_job job = {.run = run_task, .data = &work};
    if (route_run_job(server, request, model, &job, reply)) {
        cJSON *root = cJSON_CreateObject(), *result = cJSON_Parse(work.result.json);
        cJSON_AddStringToObject(root, "model", model->name);
        cJSON_AddStringToObject(root, "task", work.result.task);
        cJSON *ids = cJSON_AddArrayToObject(root, "ids");
        for (size_t i = 0; i < work.result.id_count; i++)
            cJSON_AddItemToArray(ids, cJSON_CreateNumber(work.result.ids[i]));
        cJSON_AddStringToObject(root, "text", work.result.text);
        cJSON_AddItemToObject(root, "result", result ? result : cJSON_CreateNull());
        route_reply_json(reply, 200, root);
    }
    glimpse_task_result_free(&work.result);
    glimpse_image_free(work.image);
}

/* --------------------------------------------------------- /v1/explain */

typedef struct explain_work {
    glimpse_model_kind kind;
    glimpse_image *image;
    const char *text, *question; /* question: BLIP-2's, answered and explained */
    const glimpse_caption_params *caption;
    glimpse_explain_params params;
    glimpse_explanation *explanation;
} explain_work;

static glimpse_status explain_image(serve_job *job, glimpse_context *ctx) {
    explain_work *work = job->data;
    if (work->question)
        return glimpse_explain_answer(ctx, work->image, work->question, work->caption, &work->params,
                                      &work->explanation);
    if (glimpse_model_kind_can(work->kind, GLIMPSE_CAPABILITY_CAPTION))
        return glimpse_explain_caption(ctx, work->image, work->caption, &work->params, &work->explanation);
    if (glimpse_model_kind_can(work->kind, GLIMPSE_CAPABILITY_MATCH))
        return glimpse_explain_match(ctx, work->image, work->text, &work->params, &work->explanation);
    return glimpse_explain_clip(ctx, work->image, work->text, &work->params, &work->explanation);
}

/* The answer `glimpse explain --json` prints for the image (explain_json.c writes both), with "model" first
 * instead of "image", and "png" the contact sheet in base64 when asked for. */
static void reply_explanation(serve_reply *reply, const serve_model *model, const explain_work *work, const void *png,
                              size_t png_size) {
    char *body = NULL;
    size_t size = 0;
    FILE *out = open_memstream(&body, &size);
    if (!out) {
        reply_error(reply, 503, "out of memory");
        return;
    }
    fputs("{\"model\": ", out);
    json_string(out, model->name);
    explain_json_fields(out, work->kind, work->question, work->explanation);
    if (png) {
        fputs(", \"png\": \"", out);
        json_base64(out, png, png_size);
        fputc('"', out);
    }
    fputc('}', out);
    if (fclose(out) != 0 || !body) {
        free(body);
        reply_error(reply, 503, "out of memory");
        return;
    }
    reply_body(reply, body, size, "application/json");
}

static void answer_explain(serve_server *server, serve_request *request, serve_reply *reply) {
    serve_model *model = route_choose_model(server, request_argument(request, "model"), GLIMPSE_CAPABILITY_EXPLAIN, reply);
    if (!model) return;
    glimpse_caption_params caption;
    explain_work work = {.kind = model->info.kind, .caption = &caption, .params = glimpse_explain_default_params(),
                         .text = request_argument(request, "text"), .question = request_argument(request, "question")};
    long long layer = -1, head = -1, panel = 256;
    bool png = false;
    if (!integer_argument(request, "layer", -1, 63, &layer, reply) ||
        !integer_argument(request, "head", -1, 1023, &head, reply) ||
        !integer_argument(request, "panel", 16, 4096, &panel, reply) ||
        !flag_argument(request, "occlusion", &work.params.occlusion, reply) ||
        !flag_argument(request, "png", &png, reply))
        return;
    work.params.layer = (int)layer, work.params.head = (int)head;
    if (work.question && !model_can(model, GLIMPSE_CAPABILITY_ASK)) {
        reply_error(reply, 400, "%s is a %s model: it cannot answer questions", model->name, model->info.architecture);
        return;
    }
    if (model_can(model, GLIMPSE_CAPABILITY_CAPTION)) {
        if (work.text) {
            reply_error(reply, 400, "%s captions the image and explains its own caption: send no text", model->name);
            return;
        }
        if (!caption_options(request, model, &caption, reply)) return;
    } else if (glimpse_model_kind_can(work.kind, GLIMPSE_CAPABILITY_MATCH) && !work.text) {
        reply_error(reply, 400, "%s explains a match: send the text (a field or argument named text)", model->name);
        return;
    }
    if (!request_image(server, request, &work.image, reply)) return;
    serve_job job = {.run = explain_image, .data = &work};
    if (route_run_job(server, request, model, &job, reply)) {
        void *sheet = NULL;
        size_t sheet_size = 0;
        glimpse_status status = png ? glimpse_explain_render_png(work.explanation, work.image, GLIMPSE_EXPLAIN_SHEET,
                                                                 (int)panel, NULL, &sheet, &sheet_size)
                                    : GLIMPSE_STATUS_OK;
        if (status)
            reply_error(reply, route_status_of(status), "%s", glimpse_last_error());
        else
            reply_explanation(reply, model, &work, sheet, sheet_size);
        free(sheet);
    }
    glimpse_explanation_free(work.explanation);
    glimpse_image_free(work.image);
}

/* ---------------------------------------------------------- /v1/search */

typedef struct search_work {
    glimpse_index *index;
    const char *query; /* a text query to embed first; NULL: embedding holds the query already */
    float *embedding;   /* NULL: the filter's words alone rank */
    glimpse_search_filter filter;
    size_t k, found;
    glimpse_search_result *results;
    cJSON *answer; /* the results as JSON, made while the index's paths are valid */
} search_work;

static glimpse_status search_index(serve_job *job, glimpse_context *ctx) {
    search_work *work = job->data;
    glimpse_status status = work->query ? glimpse_embed_query(ctx, work->query, work->embedding) : GLIMPSE_STATUS_OK;
    bool filtered = (work->filter.text_in && work->filter.text_in[0]) || (work->filter.object && work->filter.object[0]);
    if (!status)
        status = filtered ? glimpse_index_search_filtered(work->index, work->embedding, work->k, &work->filter,
                                                          work->results, &work->found)
                          : glimpse_index_search(work->index, work->embedding, work->k, work->results, &work->found);
    if (status) return status;
    cJSON *results = cJSON_AddArrayToObject(work->answer, "results");
    for (size_t r = 0; r < work->found; r++) {
        cJSON *result = cJSON_CreateObject();
        cJSON_AddStringToObject(result, "path", work->results[r].path);
        if (!json_utf8_valid(work->results[r].path)) { /* its bytes, to reopen it by, as the CLI's path_bytes */
            cJSON *bytes = cJSON_AddArrayToObject(result, "path_bytes");
            for (const unsigned char *c = (const unsigned char *)work->results[r].path; *c; c++)
                cJSON_AddItemToArray(bytes, cJSON_CreateNumber(*c));
        }
        if (work->results[r].time >= 0) cJSON_AddNumberToObject(result, "time", work->results[r].time); /* a frame */
        cJSON_AddNumberToObject(result, "score", work->results[r].score);
        cJSON_AddItemToArray(results, result);
    }
    return GLIMPSE_STATUS_OK;
}

static void answer_search(serve_server *server, serve_request *request, serve_reply *reply, bool post) {
    serve_model *model = server->search_model;
    if (!model) {
        reply_error(reply, 501, "no index here: start the server with --db INDEX to search");
        return;
    }
    long long k = 10;
    if (!integer_argument(request, "k", 1, SEARCH_MAX_K, &k, reply)) return;
    search_work work = {.index = model->index, .k = (size_t)k};
    const char *query = post ? NULL : request_argument(request, "q");
    work.filter.text_in = request_argument(request, "text_in");
    work.filter.object = request_argument(request, "object");
    bool filtered = (work.filter.text_in && work.filter.text_in[0]) || (work.filter.object && work.filter.object[0]);
    if ((work.filter.text_in && strlen(work.filter.text_in) > QUERY_MAX_BYTES) ||
        (work.filter.object && strlen(work.filter.object) > QUERY_MAX_BYTES)) {
        reply_error(reply, 400, "text_in and object are at most %d bytes", QUERY_MAX_BYTES);
        return;
    }
    if (!post && (!query || !query[0]) && filtered) query = NULL; /* the words alone */
    else if (!post) {
        if (!query || !query[0]) {
            reply_error(reply, 400, "no query: give q=TEXT (GET), text_in or object, or POST an image");
            return;
        }
        if (strlen(query) > QUERY_MAX_BYTES) {
            reply_error(reply, 400, "the query is longer than %d bytes", QUERY_MAX_BYTES);
            return;
        }
        if (glimpse_query_needs_images(query)) { /* @PATH parts would open files named by the client */
            reply_error(reply, 400, "image parts (@PATH) are not taken over HTTP: POST the image to /v1/search");
            return;
        }
        work.query = query;
    }
    glimpse_image *image = NULL;
    size_t dim = glimpse_model_embedding_dim(model->model);
    bool embedded = post || query;
    work.embedding = embedded ? malloc(dim * sizeof(float)) : NULL;
    work.results = malloc((size_t)k * sizeof *work.results);
    work.answer = cJSON_CreateObject();
    if ((embedded && !work.embedding) || !work.results || !work.answer) {
        reply_error(reply, 503, "out of memory");
        goto done;
    }
    if (post && (!request_image(server, request, &image, reply) ||
                 !embed_one(server, request, model, NULL, image, work.embedding, reply)))
        goto done;
    serve_job job = {.run = search_index, .data = &work};
    if (!route_run_job(server, request, model, &job, reply)) goto done;
    cJSON_AddStringToObject(work.answer, "model", model->name);
    if (query) cJSON_AddStringToObject(work.answer, "query", query);
    route_reply_json(reply, 200, work.answer);
    work.answer = NULL;
done:
    cJSON_Delete(work.answer);
    free(work.embedding);
    free(work.results);
    glimpse_image_free(image);
}

/* ----------------------------------------------- immich's POST /predict */

/* immich's machine-learning protocol for CLIP search: a form with entries
 * = {"clip": {"visual": {"modelName": M}}} and a file part image, or
 * {"clip": {"textual": {"modelName": M, "options": {...}}}} and a field text.
 * The answer: {"clip": "[...]"} (the embedding as a JSON string, as immich's
 * service sends it), with "imageHeight" and "imageWidth" for an image. */
static void answer_predict(serve_server *server, serve_request *request, serve_reply *reply) {
    const char *entries = request->kind == SERVE_BODY_MULTIPART ? request_argument(request, "entries") : NULL;
    if (!entries) {
        reply_error(reply, 422, "Invalid request format: a multipart form with an entries field is expected");
        return;
    }
    cJSON *json = cJSON_Parse(entries);
    glimpse_image *image = NULL;
    float *embedding = NULL;
    const cJSON *clip = cJSON_GetObjectItemCaseSensitive(json, "clip"), *task;
    if (cJSON_IsObject(json))
        cJSON_ArrayForEach(task, json) if (strcmp(task->string, "clip") != 0) {
            reply_error(reply, 422, "this server does immich's clip task only, not '%s'", task->string);
            goto done;
        }
    if (!cJSON_IsObject(json) || !cJSON_IsObject(clip) || cJSON_GetArraySize(clip) != 1) {
        reply_error(reply, 422, "Invalid request format: entries must be {\"clip\": {\"visual\" or \"textual\": "
                                "{\"modelName\": ...}}}");
        goto done;
    }
    const cJSON *entry = clip->child, *model_name = cJSON_GetObjectItemCaseSensitive(entry, "modelName");
    bool visual = strcmp(entry->string, "visual") == 0;
    if ((!visual && strcmp(entry->string, "textual") != 0) || !cJSON_IsObject(entry) || !cJSON_IsString(model_name)) {
        reply_error(reply, 422, "Invalid request format: clip takes visual or textual, with a modelName");
        goto done;
    }
    serve_model *model = find_model(server, model_name->valuestring);
    if (!model || !model_can(model, GLIMPSE_CAPABILITY_EMBED)) {
        reply_error(reply, 422, "no CLIP or SigLIP model named '%s' is loaded (GET /v1/models lists them)",
                    model_name->valuestring);
        goto done;
    }
    const char *text = visual ? NULL : request_argument(request, "text");
    if (!visual && !text) {
        reply_error(reply, 400, "textual needs a field named text");
        goto done;
    }
    if (visual && !request_image(server, request, &image, reply)) goto done;
    size_t dim = glimpse_model_embedding_dim(model->model);
    if (!(embedding = malloc(dim * sizeof(float)))) {
        reply_error(reply, 503, "out of memory");
        goto done;
    }
    if (!embed_one(server, request, model, text, image, embedding, reply)) goto done;
    cJSON *array = float_array(embedding, dim);
    char *serialized = array ? cJSON_PrintUnformatted(array) : NULL;
    cJSON_Delete(array);
    cJSON *root = cJSON_CreateObject();
    cJSON_AddStringToObject(root, "clip", serialized ? serialized : "");
    free(serialized);
    if (visual) {
        cJSON_AddNumberToObject(root, "imageHeight", glimpse_image_height(image));
        cJSON_AddNumberToObject(root, "imageWidth", glimpse_image_width(image));
    }
    route_reply_json(reply, serialized ? 200 : 503, root);
done:
    free(embedding);
    glimpse_image_free(image);
    cJSON_Delete(json);
}

/* ------------------------------------------------ health, models, metrics */

/* {"models": [...]} as glimpse describes them, and OpenAI's list ("object": "list", "data": [{"id", "object":
 * "model", "owned_by"}]) that its clients read. */
static void answer_models(serve_server *server, serve_reply *reply) {
    cJSON *root = cJSON_CreateObject(), *models = cJSON_AddArrayToObject(root, "models");
    cJSON_AddStringToObject(root, "object", "list");
    cJSON *data = cJSON_AddArrayToObject(root, "data");
    for (size_t i = 0; i < server->model_count; i++) {
        const serve_model *model = &server->models[i];
        cJSON *entry = cJSON_CreateObject();
        cJSON_AddStringToObject(entry, "id", model->name);
        cJSON_AddStringToObject(entry, "object", "model");
        cJSON_AddNumberToObject(entry, "created", 0);
        cJSON_AddStringToObject(entry, "owned_by", "glimpse");
        cJSON_AddItemToArray(data, entry);
        cJSON *item = cJSON_CreateObject(), *endpoints = cJSON_AddArrayToObject(item, "endpoints");
        cJSON_AddStringToObject(item, "name", model->name);
        cJSON_AddStringToObject(item, "architecture", model->info.architecture);
        cJSON_AddNumberToObject(item, "embedding_dim", model->info.embedding_dim);
        if (model_can(model, GLIMPSE_CAPABILITY_EMBED)) {
            cJSON_AddItemToArray(endpoints, cJSON_CreateString("/v1/embed"));
            cJSON_AddItemToArray(endpoints, cJSON_CreateString("/predict"));
        }
        if (model_can(model, GLIMPSE_CAPABILITY_RANK)) cJSON_AddItemToArray(endpoints, cJSON_CreateString("/v1/rank"));
        if (model_can(model, GLIMPSE_CAPABILITY_CAPTION)) cJSON_AddItemToArray(endpoints, cJSON_CreateString("/v1/caption"));
        if (model_can(model, GLIMPSE_CAPABILITY_ASK)) cJSON_AddItemToArray(endpoints, cJSON_CreateString("/v1/ask"));
        if (model_can(model, GLIMPSE_CAPABILITY_CHAT))
            cJSON_AddItemToArray(endpoints, cJSON_CreateString("/v1/chat/completions"));
        if (model_can(model, GLIMPSE_CAPABILITY_TASK)) {
            cJSON_AddItemToArray(endpoints, cJSON_CreateString("/v1/task"));
            cJSON_AddItemToArray(endpoints, cJSON_CreateString("/v1/ocr"));
            cJSON_AddItemToArray(endpoints, cJSON_CreateString("/v1/detect"));
        }
        if (model_can(model, GLIMPSE_CAPABILITY_EXPLAIN)) cJSON_AddItemToArray(endpoints, cJSON_CreateString("/v1/explain"));
        if (model == server->search_model) cJSON_AddItemToArray(endpoints, cJSON_CreateString("/v1/search"));
        cJSON_AddItemToArray(models, item);
    }
    route_reply_json(reply, 200, root);
}

static void answer_health(serve_server *server, serve_reply *reply) {
    cJSON *root = cJSON_CreateObject();
    cJSON_AddStringToObject(root, "status", "ok");
    cJSON_AddNumberToObject(root, "models", (double)server->model_count);
    route_reply_json(reply, 200, root);
}

static void answer_metrics(serve_server *server, serve_reply *reply) {
    size_t in_flight;
    pthread_mutex_lock(&server->flight_lock);
    in_flight = server->in_flight;
    pthread_mutex_unlock(&server->flight_lock);
    size_t length;
    char *text = metrics_render(&server->metrics, atomic_load(&server->load.queued), in_flight, &length);
    if (!text) {
        reply_error(reply, 503, "out of memory");
        return;
    }
    reply_body(reply, text, length, "text/plain; version=0.0.4; charset=utf-8");
}

void route_answer(serve_server *server, serve_request *request, serve_reply *reply) {
    bool has_body = request->kind != SERVE_BODY_NONE;
    if (request->bad_parts) {
        reply_error(reply, 400, "malformed form: more than %d parts, or parts that cannot be read", SERVE_MAX_PARTS);
        return;
    }
    /* a text holding a NUL would reach the library cut short at it (its texts are C strings) */
    const char *cut = request_nul_argument(request);
    if (cut) {
        reply_error(reply, 400, "the argument '%s' holds a NUL byte, which glimpse cannot take in a text", cut);
        return;
    }
    if (request->kind == SERVE_BODY_JSON && json_has_nul_escape(request->body, request->size)) {
        reply_error(reply, 400, "a JSON string holds \\u0000 (a NUL character), which glimpse cannot take");
        return;
    }
    switch (request->route) {
    case SERVE_ROUTE_EMBED: answer_embed(server, request, reply); break;
    case SERVE_ROUTE_RANK: answer_rank(server, request, reply); break;
    case SERVE_ROUTE_CAPTION: answer_caption(server, request, reply, false); break;
    case SERVE_ROUTE_SEARCH: answer_search(server, request, reply, has_body); break;
    case SERVE_ROUTE_PREDICT: answer_predict(server, request, reply); break;
    case SERVE_ROUTE_ASK: answer_caption(server, request, reply, true); break;
    case SERVE_ROUTE_CHAT: answer_chat(server, request, reply); break;
    case SERVE_ROUTE_TASK:
    case SERVE_ROUTE_OCR:
    case SERVE_ROUTE_DETECT: answer_task(server, request, reply); break;
    case SERVE_ROUTE_EXPLAIN: answer_explain(server, request, reply); break;
    case SERVE_ROUTE_PING: reply_text(reply, "text/plain", "pong"); break;
    case SERVE_ROUTE_HEALTH: answer_health(server, reply); break;
    case SERVE_ROUTE_MODELS: answer_models(server, reply); break;
    case SERVE_ROUTE_METRICS: answer_metrics(server, reply); break;
    default: reply_error(reply, 404, "no such endpoint"); break;
    }
}
