/* One rollback snapshot of PATH (absolute) into the store STORE (absolute), as `capsule run` takes
 * before a command (contents stored as objects): what bench/rollback/run.sh
 * times. Usage: snap STORE PATH */
#include <stdio.h>

#include "manifest/model.h"
#include "sandbox/rollback.h"

int main(int argc, char **argv)
{
  if (argc != 3) {
    fputs("usage: snap STORE PATH\n", stderr);
    return 2;
  }
  struct cap_strv paths = {0}, none = {0};
  cap_strv_push(&paths, argv[2]);
  struct rb_tree tree;
  struct cap_error err = {0};
  if (rb_snapshot(argv[1], &paths, &none, &none, true, &tree, &err) < 0) {
    fprintf(stderr, "snap: %s\n", err.message);
    return 1;
  }
  printf("%zu entries, root %s\n", tree.len, tree.root);
  rb_tree_free(&tree);
  cap_strv_free(&paths);
  return 0;
}
