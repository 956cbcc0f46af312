/*
 * The command tree of csictl, in one table: every command path ("volume
 * snapshot create") with its arguments, the flags it takes and what it
 * does. The help of each command (`csictl volume snapshot create -h`),
 * the group listings (`csictl volume -h`) and the bash completion
 * (`csictl completion bash`) are all printed from it, so they cannot
 * disagree. `csictl csi` keeps its own table (csictl_csi.h, in the
 * program csictl-csi); its commands are listed here by name only, and a
 * unit test checks that both tables name the same commands.
 */
#ifndef CSICTL_CMDS_H
#define CSICTL_CMDS_H

#include <stdbool.h>
#include <stdio.h>

#include "csictl_flags.h"

struct csictl_cmd {
	const char *path; /* words after "csictl"; "" is csictl itself */
	const char *args; /* positional arguments, e.g. "VOL SNAP"; NULL: none */
	/*
	 * Names of the flags it takes, space-separated. A group (a path with
	 * subcommands) lists the flags every subcommand takes.
	 */
	const char *flags;
	const char *help; /* what it does; NULL for a csi command (csictl-csi prints it) */
};

/* Every command, parents before children; ends with a zeroed entry. */
extern const struct csictl_cmd csictl_cmds[];

/* The entry of exactly this path, or NULL. */
const struct csictl_cmd *csictl_cmd_get(const char *path);

/* Whether some entry is a subcommand of cmd. */
bool csictl_cmd_is_group(const struct csictl_cmd *cmd);

/*
 * Prints the help of the deepest command named by group followed by the
 * leading words of args (a group's help when they name no subcommand):
 * usage, what it does, its subcommands, and the flags of flags[0..n) that
 * it takes (a group: every one of flags[]). group is a path such as
 * "volume" or "" for csictl itself.
 */
void csictl_cmd_help(const char *group, const struct csictl_args *args,
		     const struct csictl_flag *flags, size_t n, FILE *f);

/* Prints the bash completion script of csictl (`csictl completion bash`). */
void csictl_cmd_completion_bash(FILE *f);

#endif
