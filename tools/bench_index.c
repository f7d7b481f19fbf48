/* bench_index.c — glimpse-bench-index, the search index at scale (developers):
 * `make` fills an index with made-up clustered rows (search/index_bench.h), `run`
 * times a search process's first result, warm searches, and how often the
 * vector file's top k is the exact float32 search's. Prints; not a test. */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "search/index_bench.h"
#include "tools/cli_common.h"

static const char usage[] =
    "Usage: glimpse-bench-index make -m MODEL --db FILE --rows N [--clusters C] [--seed S]\n"
    "       glimpse-bench-index run --db FILE [--queries Q] [--clusters C] [--seed S] [-k K]\n"
    "make: a new index of N made-up rows of MODEL's embedding size, around C random\n"
    "centres (default 1000; 0: uniform on the sphere), and its vector file.\n"
    "run: opens FILE and times its first search (opening, mapping, one scan), then Q\n"
    "queries of the same kind (default 1000): the median warm search, and how many\n"
    "of them give the exact float32 search's top K (default 10) in the same order.\n";

typedef struct bench_options {
    const char *db, *model;
    long rows, clusters, queries, k, seed;
} bench_options;

static void check(glimpse_status status) {
    if (status == GLIMPSE_STATUS_OK) return;
    cli_error("%s", glimpse_last_error());
    exit(CLI_EXIT_FAILURE);
}

static int make(const bench_options *o) {
    if (!o->model || !o->rows) cli_usage_error("make", "give -m MODEL and --rows N");
    glimpse_load_params params = glimpse_load_default_params();
    params.load_vision = false;
    glimpse_model *model;
    check(glimpse_model_load(o->model, &params, &model));
    glimpse_index *index;
    check(glimpse_index_open(o->db, model, &index));
    double started = cli_now();
    check(index_bench_fill(index, (size_t)o->rows, (size_t)o->clusters, (uint64_t)o->seed));
    printf("%ld rows of %zu written to %s in %.1f s\n", o->rows, glimpse_model_embedding_dim(model), o->db,
           cli_now() - started);
    glimpse_index_free(index);
    glimpse_model_free(model);
    return CLI_EXIT_OK;
}

/* CPU seconds of the process, every thread counted: on a loaded machine, what a search costs apart from waiting. */
static double cpu_now(void) {
    struct timespec now;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &now);
    return (double)now.tv_sec + now.tv_nsec * 1e-9;
}

static int compare_doubles(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static int run(const bench_options *o) {
    double started = cli_now(), cpu_started = cpu_now();
    glimpse_index *index;
    check(glimpse_index_open(o->db, NULL, &index));
    size_t dim = glimpse_index_embedding_dim(index), k = (size_t)o->k;
    const uint64_t queries = (uint64_t)1 << 40; /* query numbers: far beyond any row's */
    float *query = cli_calloc(dim, sizeof(float));
    glimpse_search_result *fast = cli_calloc(k, sizeof *fast), *exact = cli_calloc(k, sizeof *exact);
    size_t found, exact_found;
    index_bench_random_row(query, dim, (size_t)o->clusters, (uint64_t)o->seed, queries);
    check(glimpse_index_search(index, query, k, fast, &found));
    double first = cli_now() - started, first_cpu = cpu_now() - cpu_started;
    printf("%zu rows of %zu: first search in this process %.1f ms, %.1f ms of CPU (opening, mapping, one scan)\n",
           glimpse_index_count(index), dim, first * 1e3, first_cpu * 1e3);
    double *times = cli_calloc((size_t)o->queries, sizeof *times), *cpu = cli_calloc((size_t)o->queries, sizeof *cpu);
    long same_order = 0, same_set = 0;
    for (long q = 0; q < o->queries; q++) {
        index_bench_random_row(query, dim, (size_t)o->clusters, (uint64_t)o->seed, queries + 1 + (uint64_t)q);
        double start = cli_now(), cpu_start = cpu_now();
        check(glimpse_index_search(index, query, k, fast, &found));
        times[q] = cli_now() - start, cpu[q] = cpu_now() - cpu_start;
        check(index_bench_search_exact(index, query, k, exact, &exact_found));
        bool order = found == exact_found, set = order;
        for (size_t r = 0; r < found && order; r++) order = strcmp(fast[r].path, exact[r].path) == 0;
        for (size_t r = 0; r < found && set; r++) {
            bool in = false;
            for (size_t e = 0; e < exact_found && !in; e++) in = strcmp(fast[r].path, exact[e].path) == 0;
            set = in;
        }
        same_order += order, same_set += set;
    }
    qsort(times, (size_t)o->queries, sizeof *times, compare_doubles);
    qsort(cpu, (size_t)o->queries, sizeof *cpu, compare_doubles);
    printf("warm search: median %.2f ms, 90th percentile %.2f ms over %ld queries; median CPU %.2f ms (all threads)\n",
           times[o->queries / 2] * 1e3, times[o->queries * 9 / 10] * 1e3, o->queries, cpu[o->queries / 2] * 1e3);
    printf("top %zu identical to the exact float32 search: %ld of %ld in order (%.2f%%), %ld as a set\n", k,
           same_order, o->queries, 100.0 * same_order / o->queries, same_set);
    free(query), free(fast), free(exact), free(times), free(cpu);
    glimpse_index_free(index);
    return CLI_EXIT_OK;
}

int main(int argc, char **argv) {
    if (argc < 2 || (strcmp(argv[1], "make") != 0 && strcmp(argv[1], "run") != 0)) {
        fputs(usage, stderr);
        return CLI_EXIT_USAGE;
    }
    bench_options o = {.clusters = 1000, .queries = 1000, .k = 10, .seed = 7};
    static const struct option options[] = {
        {"db", required_argument, NULL, 'd'},       {"model", required_argument, NULL, 'm'},
        {"rows", required_argument, NULL, 'r'},     {"clusters", required_argument, NULL, 'c'},
        {"queries", required_argument, NULL, 'q'},  {"seed", required_argument, NULL, 's'},
        {NULL, 0, NULL, 0}};
    int code;
    while ((code = getopt_long(argc - 1, argv + 1, "m:k:", options, NULL)) != -1) {
        switch (code) {
        case 'd': o.db = optarg; break;
        case 'm': o.model = optarg; break;
        case 'r': o.rows = cli_parse_long(argv[1], "--rows", optarg, 1, 1L << 32); break;
        case 'c': o.clusters = cli_parse_long(argv[1], "--clusters", optarg, 0, 1L << 32); break;
        case 'q': o.queries = cli_parse_long(argv[1], "--queries", optarg, 1, 1L << 24); break;
        case 's': o.seed = cli_parse_long(argv[1], "--seed", optarg, 0, 1L << 62); break;
        case 'k': o.k = cli_parse_long(argv[1], "-k", optarg, 1, 1000); break;
        default: fputs(usage, stderr); return CLI_EXIT_USAGE;
        }
    }
    if (!o.db) cli_usage_error(argv[1], "give --db FILE");
    return strcmp(argv[1], "make") == 0 ? make(&o) : run(&o);
}
