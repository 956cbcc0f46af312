/*
 * mdroff: turns the parts of a markdown page marked for one man page into
 * roff (the man macros), so docs/configuration.md is the one source of the
 * reference page and of the man pages csid(8) and csictl(1). A build tool,
 * not installed.
 *
 *   mdroff IN.md NAME SECTION VERSION "DESCRIPTION" OUT
 *
 * The lines between "<!-- man NAME begin -->" and "<!-- man NAME end -->"
 * are converted (several such ranges are joined). The markdown subset:
 *   ## Heading        .SH (the first, naming the page, becomes DESCRIPTION)
 *   ### Heading       .SS
 *   paragraphs        .PP, text filled
 *   - item            .IP with a bullet; indented lines continue it
 *   | a | b | c |     a table: each row an .TP, its first cell the tag, the
 *                     middle cells "Header: cell." (none for "—"), the last
 *                     cell the text
 *   ```               a literal block (.nf)
 *   `code` **bold**   bold; [text](url) becomes text
 * Anything else is text. Backslashes, dashes and line-leading dots are
 * escaped so groff reads the text as text.
 */
#include <ctype.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MDROFF_LINE_MAX 4096
#define MDROFF_CELLS_MAX 8

struct mdroff {
	FILE *out;
	bool in_para; /* a paragraph or list item is open */
	bool in_code;
	bool first_h2;
	int table_row; /* rows of the current table seen, 0 outside one */
	char header[MDROFF_CELLS_MAX][128];
	int ncols;
};

/*
 * Writes the UTF-8 sequence at s (of at most len bytes) as a groff
 * \[uXXXX] escape, so groff needs no input encoding; returns the bytes read.
 */
static size_t mdroff_utf8(FILE *out, const char *s, size_t len)
{
	const unsigned char *u = (const unsigned char *)s;
	unsigned cp;
	size_t n = u[0] >= 0xf0 ? 4 : u[0] >= 0xe0 ? 3 : 2;

	if (n > len) {
		fputc('?', out);
		return len;
	}
	cp = u[0] & (0x3f >> (n - 1));
	for (size_t i = 1; i < n; i++)
		cp = (cp << 6) | (u[i] & 0x3f);
	fprintf(out, "\\[u%04X]", cp);
	return n;
}

/* Writes s escaped for roff, with markdown's inline marks turned into fonts. */
static void mdroff_inline(FILE *out, const char *s, size_t len)
{
	bool code = false, bold = false;

	for (size_t i = 0; i < len; i++) {
		char c = s[i];

		if (c == '`') {
			code = !code;
			fputs(code ? "\\fB" : "\\fR", out);
		} else if (!code && c == '*' && i + 1 < len && s[i + 1] == '*') {
			bold = !bold;
			fputs(bold ? "\\fB" : "\\fR", out);
			i++;
		} else if (!code && c == '[' && memchr(s + i, ']', len - i)) {
			const char *close = memchr(s + i, ']', len - i);
			size_t at = (size_t)(close - s);

			if (at + 1 < len && s[at + 1] == '(' && memchr(s + at, ')', len - at)) {
				const char *paren = memchr(s + at, ')', len - at);

				mdroff_inline(out, s + i + 1, at - i - 1);
				i = (size_t)(paren - s);
			} else {
				fputc('[', out);
			}
		} else if (c == '\\') {
			fputs("\\e", out);
		} else if (c == '-') {
			fputs("\\-", out);
		} else if ((unsigned char)c >= 0x80) {
			i += mdroff_utf8(out, s + i, len - i) - 1;
		} else {
			fputc(c, out);
		}
	}
	if (code || bold)
		fputs("\\fR", out);
}

/* A text line of a paragraph, starting a new output line. */
static void mdroff_text(FILE *out, const char *s)
{
	while (*s == ' ')
		s++;
	if (*s == '.' || *s == '\'')
		fputs("\\&", out);
	mdroff_inline(out, s, strlen(s));
	fputc('\n', out);
}

/* Splits a table row "| a | b |" into cells (trimmed, pointing into row). */
static int mdroff_cells(char *row, char **cells)
{
	int n = 0;
	char *p = row + 1;

	while (n < MDROFF_CELLS_MAX) {
		char *bar = strchr(p, '|'), *end;

		if (!bar)
			break;
		*bar = '\0';
		while (*p == ' ')
			p++;
		end = p + strlen(p);
		while (end > p && end[-1] == ' ')
			*--end = '\0';
		cells[n++] = p;
		p = bar + 1;
	}
	return n;
}

static void mdroff_row(struct mdroff *m, char *line)
{
	char *cells[MDROFF_CELLS_MAX];
	int n = mdroff_cells(line, cells);

	m->table_row++;
	if (m->table_row == 1) {
		m->ncols = n;
		for (int i = 0; i < n; i++)
			snprintf(m->header[i], sizeof(m->header[i]), "%s", cells[i]);
		return;
	}
	if (m->table_row == 2 || n == 0)
		return; /* the | --- | line */
	fputs(".TP\n", m->out);
	mdroff_text(m->out, cells[0]);
	for (int i = 1; i < n - 1 && i < m->ncols; i++) {
		char head[128];

		if (strcmp(cells[i], "\u2014") == 0 || !cells[i][0])
			continue; /* an empty cell: "—" */
		snprintf(head, sizeof(head), "%s", m->header[i]);
		head[0] = (char)toupper((unsigned char)head[0]);
		fprintf(m->out, "%s: ", head);
		mdroff_inline(m->out, cells[i], strlen(cells[i]));
		fputs(".\n", m->out);
	}
	if (n > 1)
		mdroff_text(m->out, cells[n - 1]);
}

static void mdroff_line(struct mdroff *m, char *line, const char *name)
{
	if (m->in_code) {
		if (strncmp(line, "```", 3) == 0) {
			fputs(".fi\n.RE\n", m->out);
			m->in_code = false;
		} else {
			if (line[0] == '.' || line[0] == '\'')
				fputs("\\&", m->out);
			for (const char *c = line; *c; c++) {
				if (*c == '\\')
					fputs("\\e", m->out);
				else if (*c == '-')
					fputs("\\-", m->out);
				else if ((unsigned char)*c >= 0x80)
					c += mdroff_utf8(m->out, c, strlen(c)) - 1;
				else
					fputc(*c, m->out);
			}
			fputc('\n', m->out);
		}
		return;
	}
	if (line[0] != '|')
		m->table_row = 0;
	if (strncmp(line, "<!--", 4) == 0)
		return;
	if (strncmp(line, "```", 3) == 0) {
		fputs(".PP\n.RS 4\n.nf\n", m->out);
		m->in_code = true;
		m->in_para = false;
	} else if (strncmp(line, "## ", 3) == 0) {
		const char *h = line + 3;

		if (!m->first_h2 && strcmp(h, name) == 0)
			h = "DESCRIPTION";
		fputs(".SH ", m->out);
		for (; *h; h++)
			fputc(toupper((unsigned char)*h), m->out);
		fputc('\n', m->out);
		m->first_h2 = true;
		m->in_para = false;
	} else if (strncmp(line, "### ", 4) == 0) {
		fputs(".SS ", m->out);
		mdroff_text(m->out, line + 4);
		m->in_para = false;
	} else if (line[0] == '|') {
		mdroff_row(m, line);
		m->in_para = false;
	} else if (strncmp(line, "- ", 2) == 0) {
		fputs(".IP \\(bu 2\n", m->out);
		mdroff_text(m->out, line + 2);
		m->in_para = true;
	} else if (line[0] == '\0') {
		m->in_para = false;
	} else {
		if (!m->in_para)
			fputs(".PP\n", m->out);
		m->in_para = true;
		mdroff_text(m->out, line);
	}
}

int main(int argc, char **argv)
{
	char line[MDROFF_LINE_MAX], begin[128], end[128];
	struct mdroff m = {0};
	bool on = false;
	int ranges = 0;
	FILE *in;

	if (argc != 7) {
		fprintf(stderr, "usage: mdroff IN.md NAME SECTION VERSION DESCRIPTION OUT\n");
		return 2;
	}
	in = fopen(argv[1], "r");
	m.out = fopen(argv[6], "w");
	if (!in || !m.out) {
		fprintf(stderr, "mdroff: cannot open %s or %s\n", argv[1], argv[6]);
		return 1;
	}
	snprintf(begin, sizeof(begin), "<!-- man %s begin -->", argv[2]);
	snprintf(end, sizeof(end), "<!-- man %s end -->", argv[2]);
	fprintf(m.out, ".\\\" Made by tools/mdroff.c from %s: edit that page, not this file.\n",
		strrchr(argv[1], '/') ? strrchr(argv[1], '/') + 1 : argv[1]);
	fputs(".TH ", m.out);
	for (const char *c = argv[2]; *c; c++)
		fputc(toupper((unsigned char)*c), m.out);
	fprintf(m.out, " %s \"\" \"csid %s\" \"csid manual\"\n.SH NAME\n%s \\- ", argv[3], argv[4],
		argv[2]);
	mdroff_inline(m.out, argv[5], strlen(argv[5]));
	fputc('\n', m.out);
	while (fgets(line, sizeof(line), in)) {
		line[strcspn(line, "\n")] = '\0';
		if (strcmp(line, begin) == 0) {
			on = true;
			ranges++;
			continue;
		}
		if (strcmp(line, end) == 0) {
			on = false;
			continue;
		}
		if (on)
			mdroff_line(&m, line, argv[2]);
	}
	fprintf(m.out, ".SH SEE ALSO\n%s, docs/configuration.md\n",
		strcmp(argv[2], "csid") == 0 ? "\\fBcsictl\\fR(1)" : "\\fBcsid\\fR(8)");
	fclose(in);
	if (fclose(m.out) != 0 || on || ranges == 0) {
		fprintf(stderr, "mdroff: %s: no closed range marked for %s\n", argv[1], argv[2]);
		return 1;
	}
	return 0;
}
