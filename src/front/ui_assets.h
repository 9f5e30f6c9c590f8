/* The dashboard's static files (src/front/ui.css, ui.js, embedded at
 * build time by scripts/embed.py): served from /static/, the only script
 * and style the pages' Content-Security-Policy allows. */
#ifndef CAPSULE_FRONT_UI_ASSETS_H
#define CAPSULE_FRONT_UI_ASSETS_H

#include <stddef.h>

struct ui_asset {
  const char *path, *type;
  const char *data;
  size_t len;
};

/* The asset at url ("/static/ui.js"), or NULL. */
const struct ui_asset *ui_asset_find(const char *url);

#endif
