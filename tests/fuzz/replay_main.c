/* replay_main.c - runs a harness over every file of the directories given
 * (its seed corpus and its regression inputs), for builds without libFuzzer.
 * Exit 0 when every input ran; a broken invariant aborts. */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "fuzz.h"

/* Inputs stay small (the harnesses cap what they look at); a bigger file is
 * a mistake in the corpus, not something to load. */
#define REPLAY_MAX (1u << 20)

static int replay_file(const char *path, size_t *ran)
{
    FILE *f = fopen(path, "rb");
    if (f == NULL) {
        fprintf(stderr, "replay: %s: %s\n", path, strerror(errno));
        return -1;
    }
    uint8_t *buf = malloc(REPLAY_MAX);
    if (buf == NULL) {
        fclose(f);
        fprintf(stderr, "replay: out of memory\n");
        return -1;
    }
    size_t n = fread(buf, 1, REPLAY_MAX, f);
    int bad = ferror(f) || !feof(f);
    fclose(f);
    if (bad) {
        fprintf(stderr, "replay: %s: unreadable or over %u bytes\n", path, REPLAY_MAX);
        free(buf);
        return -1;
    }
    /* An exact-size copy, so ASan sees a read one past the input. */
    uint8_t *exact = malloc(n > 0 ? n : 1);
    if (exact == NULL) {
        free(buf);
        fprintf(stderr, "replay: out of memory\n");
        return -1;
    }
    memcpy(exact, buf, n);
    free(buf);
    (void)LLVMFuzzerTestOneInput(exact, n);
    free(exact);
    (*ran)++;
    return 0;
}

int main(int argc, char **argv)
{
    size_t ran = 0;
    for (int i = 1; i < argc; i++) {
        DIR *d = opendir(argv[i]);
        if (d == NULL) {
            if (errno == ENOENT)
                continue; /* no regression inputs yet */
            fprintf(stderr, "replay: %s: %s\n", argv[i], strerror(errno));
            return 2;
        }
        struct dirent *e;
        while ((e = readdir(d)) != NULL) {
            char path[4096];
            struct stat sb;
            if (e->d_name[0] == '.')
                continue;
            if (snprintf(path, sizeof path, "%s/%s", argv[i], e->d_name) >= (int)sizeof path)
                continue;
            if (stat(path, &sb) != 0 || !S_ISREG(sb.st_mode))
                continue;
            if (replay_file(path, &ran) != 0) {
                closedir(d);
                return 2;
            }
        }
        closedir(d);
    }
    if (ran == 0) {
        fprintf(stderr, "replay: no input found\n");
        return 2;
    }
    printf("replay: %zu inputs ran\n", ran);
    return 0;
}
