/*
meter.c - a tiny load meter (written for the cidermill demo)
Released under the GNU GPLv2+, see the COPYING file
in the source distribution for its full text.
*/

#include <stdio.h>
#include <stdlib.h>

/* Reads the 1-minute load average and prints a bar of '#' characters. */
int main(void) {
    double load = 0.0;
    FILE *f = fopen("/proc/loadavg", "r");
    if (f == NULL || fscanf(f, "%lf", &load) != 1) {
        fprintf(stderr, "cannot read /proc/loadavg\n");
        return 1;
    }
    fclose(f);
    int width = (int)(load * 10.0);
    if (width > 60) {
        width = 60;
    }
    printf("load %5.2f [", load);
    for (int i = 0; i < 60; i++) {
        putchar(i < width ? '#' : ' ');
    }
    printf("]\n");
    return 0;
}
