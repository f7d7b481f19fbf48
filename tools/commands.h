/* commands.h — the entry points of the glimpse subcommands, one per
 * command; each takes the arguments after the command name (argv[0] is the
 * command) and returns the process exit status. */
#ifndef GLIMPSE_TOOLS_COMMANDS_H
#define GLIMPSE_TOOLS_COMMANDS_H

int command_embed(int argc, char **argv);
int command_rank(int argc, char **argv);
int command_classify(int argc, char **argv);
int command_info(int argc, char **argv);
int command_caption(int argc, char **argv);
int command_ask(int argc, char **argv);
int command_chat(int argc, char **argv);
int command_bench(int argc, char **argv);
int command_index(int argc, char **argv);
int command_search(int argc, char **argv);
int command_explain(int argc, char **argv);
int command_serve(int argc, char **argv);
int command_duplicates(int argc, char **argv);
/* Florence-2's tasks (cli_task.c) */
int command_task(int argc, char **argv);
int command_ocr(int argc, char **argv);
int command_detect(int argc, char **argv);
int command_segment(int argc, char **argv);
int command_describe(int argc, char **argv);

#endif
