/*
 * pd_tmx.h - turns a Tiled XML document (.tmx map or .tsx tileset) into the
 * cJSON tree of its Tiled JSON equivalent (.tmj / .tsj).
 *
 * Tiled's JSON format is a one-to-one rendering of the XML one
 * (doc.mapeditor.org, "JSON Map Format"), so converting lets one reader
 * (pd_tiled.c) apply the walkability rules to both, with the same checks and
 * the same error paths: "$.layers[2]" is the third layer element of the
 * .tmx in document order, groups counting as one. Layer data stays text
 * (CSV or base64) for pd_tdata; <tile gid=".."/> elements become a gid array.
 * Only what pathd reads is converted: images, editor settings, wang sets and
 * animations are dropped.
 */
#ifndef PD_TMX_H
#define PD_TMX_H

#include <stddef.h>

#include <cjson/cJSON.h>

/* Parses buf[0..len) with libxml2 (no network, no external entities) and
 * returns the JSON tree of its root <map> or <tileset>, to be freed with
 * cJSON_Delete; NULL with "LINE:COL: invalid XML: reason" or a structural
 * reason in err. */
cJSON *pd_tmx_to_json(const char *buf, size_t len, char *err, size_t errlen);

#endif
