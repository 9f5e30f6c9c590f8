/* The hostile tool's kernel probes (kernel_probes.c): -1 when argv[1]
 * names none of them, else the probe's exit status. */
#ifndef CAPSULE_TESTS_KERNEL_PROBES_H
#define CAPSULE_TESTS_KERNEL_PROBES_H
int kernel_probe(int argc, char **argv);
/* inet_probes.c: inet-refused NAME, inet-works [PORT]; -1 for anything else */
int inet_probe(int argc, char **argv);
#endif
