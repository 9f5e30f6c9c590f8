/* The dashboard's static files (ui_assets.h). */
#include "front/ui_assets.h"

#include <string.h>

#include "core/cleanup.h"

extern const char ui_css[], ui_js[];
extern const size_t ui_css_len, ui_js_len;

const struct ui_asset *ui_asset_find(const char *url)
{
  static struct ui_asset assets[] = {
      {"/static/ui.css", "text/css; charset=utf-8", NULL, 0},
      {"/static/ui.js", "text/javascript; charset=utf-8", NULL, 0},
  };
  assets[0].data = ui_css, assets[0].len = ui_css_len;
  assets[1].data = ui_js, assets[1].len = ui_js_len;
  for (size_t i = 0; i < ARRAY_SIZE(assets); i++)
    if (strcmp(url, assets[i].path) == 0)
      return &assets[i];
  return NULL;
}
