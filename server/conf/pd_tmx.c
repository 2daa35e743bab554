/*
 * pd_tmx.c - .tmx / .tsx to the Tiled JSON tree (see pd_tmx.h).
 *
 * Attributes become members; the ones the JSON format writes as numbers or
 * booleans are converted (a value that is not a number stays a string, so
 * pd_tiled reports it as "must be an integer, not string" with its path).
 * Child elements map as the JSON format maps them: layers in document order
 * into "layers" with their "type", <tileset> into "tilesets", <tile> of a
 * tileset into "tiles" (its <image> into "image" and its size into
 * "imagewidth" and "imageheight"), <tileoffset> into "tileoffset", <object>
 * into "objects", <properties> into an array of {name, type, value}.
 */
#include "pd_tmx.h"
#include "pd_reason.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <libxml/parser.h>
#include <libxml/tree.h>

/* Attributes the JSON format writes as numbers. */
static const char *const pd__numeric_attrs[] = {
    "x", "y", "width", "height", "rotation", "firstgid", "id", "tilecount", "tilewidth",
    "tileheight", "offsetx", "offsety", "gid", "columns",
};

static int pd__name_is(const xmlNode *n, const char *name)
{
    return n->type == XML_ELEMENT_NODE && strcmp((const char *)n->name, name) == 0;
}

/* A number when the whole text is one, else NULL. */
static cJSON *pd__number_or_null(const char *s)
{
    char *end = NULL;
    double d = strtod(s, &end);
    if (end == s || *end != '\0')
        return NULL;
    return cJSON_CreateNumber(d);
}

static cJSON *pd__attr_value(const char *name, const char *value)
{
    if (strcmp(name, "infinite") == 0 && (strcmp(value, "0") == 0 || strcmp(value, "1") == 0))
        return cJSON_CreateBool(value[0] == '1');
    for (size_t i = 0; i < sizeof pd__numeric_attrs / sizeof pd__numeric_attrs[0]; i++) {
        if (strcmp(name, pd__numeric_attrs[i]) == 0) {
            cJSON *num = pd__number_or_null(value);
            if (num)
                return num;
            break;
        }
    }
    return cJSON_CreateString(value);
}

/* Every attribute of n as a member of obj. Returns 0, -1 out of memory. */
static int pd__copy_attrs(const xmlNode *n, cJSON *obj)
{
    for (const xmlAttr *a = n->properties; a; a = a->next) {
        xmlChar *v = xmlNodeListGetString(n->doc, a->children, 1);
        cJSON *item = pd__attr_value((const char *)a->name, v ? (const char *)v : "");
        xmlFree(v);
        if (!item || !cJSON_AddItemToObject(obj, (const char *)a->name, item)) {
            cJSON_Delete(item);
            return -1;
        }
    }
    return 0;
}

static int pd__add(cJSON *obj, const char *key, cJSON *item)
{
    if (!item)
        return -1;
    if (!cJSON_AddItemToObject(obj, key, item)) {
        cJSON_Delete(item);
        return -1;
    }
    return 0;
}

/* n's attribute attr (when it has one) as obj[key]. Returns 0, -1 out of memory. */
static int pd__add_attr_as(const xmlNode *n, const char *attr, cJSON *obj, const char *key)
{
    xmlChar *v = xmlGetProp(n, (const xmlChar *)attr);
    if (!v)
        return 0;
    cJSON *item = pd__attr_value(attr, (const char *)v);
    xmlFree(v);
    return pd__add(obj, key, item);
}

/* The array obj[key], created on first use. */
static cJSON *pd__array(cJSON *obj, const char *key)
{
    cJSON *arr = cJSON_GetObjectItemCaseSensitive(obj, key);
    if (arr)
        return arr;
    arr = cJSON_CreateArray();
    if (pd__add(obj, key, arr) != 0)
        return NULL;
    return arr;
}

static int pd__append(cJSON *arr, cJSON *item)
{
    if (!arr || !item || !cJSON_AddItemToArray(arr, item)) {
        cJSON_Delete(item);
        return -1;
    }
    return 0;
}

/* <properties><property name type value/>...: value typed as the JSON
 * format types it (bool, int, float as JSON values; the rest as strings). A
 * multi-line string property keeps its value in the element text. */
static cJSON *pd__properties(const xmlNode *n)
{
    cJSON *arr = cJSON_CreateArray();
    if (!arr)
        return NULL;
    for (const xmlNode *p = n->children; p; p = p->next) {
        if (!pd__name_is(p, "property"))
            continue;
        cJSON *prop = cJSON_CreateObject();
        if (pd__append(arr, prop) != 0)
            goto fail;
        xmlChar *name = xmlGetProp(p, (const xmlChar *)"name");
        xmlChar *type = xmlGetProp(p, (const xmlChar *)"type");
        xmlChar *value = xmlGetProp(p, (const xmlChar *)"value");
        if (!value)
            value = xmlNodeGetContent(p);
        const char *t = type ? (const char *)type : "string";
        const char *v = value ? (const char *)value : "";
        cJSON *val;
        if (strcmp(t, "bool") == 0 && (strcmp(v, "true") == 0 || strcmp(v, "false") == 0))
            val = cJSON_CreateBool(v[0] == 't');
        else if (strcmp(t, "int") == 0 || strcmp(t, "float") == 0 || strcmp(t, "object") == 0)
            val = pd__number_or_null(v);
        else
            val = NULL;
        if (!val)
            val = cJSON_CreateString(v);
        int rc = (name ? pd__add(prop, "name", cJSON_CreateString((const char *)name)) : 0) |
                 pd__add(prop, "type", cJSON_CreateString(t)) | pd__add(prop, "value", val);
        xmlFree(name);
        xmlFree(type);
        xmlFree(value);
        if (rc != 0)
            goto fail;
    }
    return arr;
fail:
    cJSON_Delete(arr);
    return NULL;
}

/* "x1,y1 x2,y2 ..." into [{x, y}, ...]; a malformed pair becomes a string
 * element, which pd_tiled refuses with its path. */
static cJSON *pd__points(const char *s)
{
    cJSON *arr = cJSON_CreateArray();
    while (arr && *s) {
        while (*s == ' ')
            s++;
        if (!*s)
            break;
        char *end = NULL;
        double x = strtod(s, &end);
        cJSON *pt;
        if (end == s || *end != ',') {
            pt = cJSON_CreateString(s);
            s += strlen(s);
        } else {
            const char *ys = end + 1;
            double y = strtod(ys, &end);
            if (end == ys || (*end != ' ' && *end != '\0')) {
                pt = cJSON_CreateString(s);
                s += strlen(s);
            } else {
                pt = cJSON_CreateObject();
                if (pt && (pd__add(pt, "x", cJSON_CreateNumber(x)) != 0 ||
                           pd__add(pt, "y", cJSON_CreateNumber(y)) != 0)) {
                    cJSON_Delete(pt);
                    pt = NULL;
                }
                s = end;
            }
        }
        if (pd__append(arr, pt) != 0) {
            cJSON_Delete(arr);
            return NULL;
        }
    }
    return arr;
}

static cJSON *pd__object(const xmlNode *n)
{
    cJSON *obj = cJSON_CreateObject();
    if (!obj || pd__copy_attrs(n, obj) != 0)
        goto fail;
    for (const xmlNode *c = n->children; c; c = c->next) {
        int rc = 0;
        if (pd__name_is(c, "ellipse") || pd__name_is(c, "point")) {
            rc = pd__add(obj, (const char *)c->name, cJSON_CreateTrue());
        } else if (pd__name_is(c, "polygon") || pd__name_is(c, "polyline")) {
            xmlChar *pts = xmlGetProp(c, (const xmlChar *)"points");
            rc = pd__add(obj, (const char *)c->name, pd__points(pts ? (const char *)pts : ""));
            xmlFree(pts);
        } else if (pd__name_is(c, "text")) {
            rc = pd__add(obj, "text", cJSON_CreateObject());
        } else if (pd__name_is(c, "properties")) {
            rc = pd__add(obj, "properties", pd__properties(c));
        }
        if (rc != 0)
            goto fail;
    }
    return obj;
fail:
    cJSON_Delete(obj);
    return NULL;
}

/* <objectgroup> as a layer (or a tile's collision group): its objects. */
static cJSON *pd__objectgroup(const xmlNode *n)
{
    cJSON *layer = cJSON_CreateObject();
    if (!layer || pd__copy_attrs(n, layer) != 0 ||
        pd__add(layer, "type", cJSON_CreateString("objectgroup")) != 0 || !pd__array(layer, "objects"))
        goto fail;
    for (const xmlNode *c = n->children; c; c = c->next) {
        int rc = 0;
        if (pd__name_is(c, "object"))
            rc = pd__append(pd__array(layer, "objects"), pd__object(c));
        else if (pd__name_is(c, "properties"))
            rc = pd__add(layer, "properties", pd__properties(c));
        if (rc != 0)
            goto fail;
    }
    return layer;
fail:
    cJSON_Delete(layer);
    return NULL;
}

/* The text of a <data> or <chunk>, or its <tile gid=".."/> children as an
 * array when it has no encoding (the oldest TMX form). */
static cJSON *pd__data_payload(const xmlNode *n, int has_encoding)
{
    if (has_encoding) {
        xmlChar *text = xmlNodeGetContent(n);
        cJSON *s = cJSON_CreateString(text ? (const char *)text : "");
        xmlFree(text);
        return s;
    }
    cJSON *arr = cJSON_CreateArray();
    for (const xmlNode *t = n->children; arr && t; t = t->next) {
        if (!pd__name_is(t, "tile"))
            continue;
        xmlChar *gid = xmlGetProp(t, (const xmlChar *)"gid");
        cJSON *v = gid ? pd__attr_value("gid", (const char *)gid) : cJSON_CreateNumber(0);
        xmlFree(gid);
        if (pd__append(arr, v) != 0) {
            cJSON_Delete(arr);
            return NULL;
        }
    }
    return arr;
}

static int pd__tilelayer_data(const xmlNode *data, cJSON *layer)
{
    xmlChar *enc = xmlGetProp(data, (const xmlChar *)"encoding");
    xmlChar *comp = xmlGetProp(data, (const xmlChar *)"compression");
    int rc = 0;
    if (enc)
        rc |= pd__add(layer, "encoding", cJSON_CreateString((const char *)enc));
    if (comp)
        rc |= pd__add(layer, "compression", cJSON_CreateString((const char *)comp));
    int chunked = 0;
    for (const xmlNode *c = data->children; c && rc == 0; c = c->next) {
        if (!pd__name_is(c, "chunk"))
            continue;
        chunked = 1;
        cJSON *chunk = cJSON_CreateObject();
        if (!chunk || pd__copy_attrs(c, chunk) != 0 ||
            pd__add(chunk, "data", pd__data_payload(c, enc != NULL)) != 0) {
            cJSON_Delete(chunk);
            rc = -1;
        } else {
            rc = pd__append(pd__array(layer, "chunks"), chunk);
        }
    }
    if (rc == 0 && !chunked)
        rc = pd__add(layer, "data", pd__data_payload(data, enc != NULL));
    xmlFree(enc);
    xmlFree(comp);
    return rc;
}

static cJSON *pd__layers_into(const xmlNode *parent, cJSON *owner);

static cJSON *pd__layer(const xmlNode *n)
{
    if (pd__name_is(n, "objectgroup"))
        return pd__objectgroup(n);
    cJSON *layer = cJSON_CreateObject();
    if (!layer || pd__copy_attrs(n, layer) != 0)
        goto fail;
    const char *type = pd__name_is(n, "layer") ? "tilelayer" : (const char *)n->name;
    if (pd__add(layer, "type", cJSON_CreateString(type)) != 0)
        goto fail;
    if (pd__name_is(n, "group") && !pd__layers_into(n, layer))
        goto fail;
    for (const xmlNode *c = n->children; c; c = c->next) {
        int rc = 0;
        if (pd__name_is(n, "layer") && pd__name_is(c, "data"))
            rc = pd__tilelayer_data(c, layer);
        else if (pd__name_is(c, "properties"))
            rc = pd__add(layer, "properties", pd__properties(c));
        if (rc != 0)
            goto fail;
    }
    return layer;
fail:
    cJSON_Delete(layer);
    return NULL;
}

/* The layer elements under parent, in document order, as owner.layers. */
static cJSON *pd__layers_into(const xmlNode *parent, cJSON *owner)
{
    cJSON *arr = pd__array(owner, "layers");
    for (const xmlNode *c = parent->children; arr && c; c = c->next) {
        if (!(pd__name_is(c, "layer") || pd__name_is(c, "objectgroup") ||
              pd__name_is(c, "imagelayer") || pd__name_is(c, "group")))
            continue;
        if (pd__append(arr, pd__layer(c)) != 0)
            return NULL;
    }
    return arr;
}

static cJSON *pd__tileset(const xmlNode *n)
{
    cJSON *ts = cJSON_CreateObject();
    if (!ts || pd__copy_attrs(n, ts) != 0 ||
        pd__add(ts, "type", cJSON_CreateString("tileset")) != 0)
        goto fail;
    for (const xmlNode *c = n->children; c; c = c->next) {
        int rc = 0;
        if (pd__name_is(c, "properties")) {
            rc = pd__add(ts, "properties", pd__properties(c));
        } else if (pd__name_is(c, "tileoffset")) {
            /* <tileoffset x y/>: {"x", "y"}, as the JSON format writes it. */
            cJSON *off = cJSON_CreateObject();
            rc = pd__add(ts, "tileoffset", off);
            if (rc == 0)
                rc = pd__copy_attrs(c, off);
        } else if (pd__name_is(c, "tile")) {
            cJSON *tile = cJSON_CreateObject();
            rc = pd__append(pd__array(ts, "tiles"), tile);
            if (rc == 0)
                rc = pd__copy_attrs(c, tile);
            for (const xmlNode *t = c->children; rc == 0 && t; t = t->next) {
                if (pd__name_is(t, "properties"))
                    rc = pd__add(tile, "properties", pd__properties(t));
                else if (pd__name_is(t, "objectgroup"))
                    rc = pd__add(tile, "objectgroup", pd__objectgroup(t));
                else if (pd__name_is(t, "image"))
                    /* An image collection's tile (its id may pass tilecount),
                     * and its size, as the JSON format's imagewidth and
                     * imageheight: a tile object of it is drawn at it. */
                    rc = pd__add(tile, "image", cJSON_CreateTrue()) != 0 ||
                                 pd__add_attr_as(t, "width", tile, "imagewidth") != 0 ||
                                 pd__add_attr_as(t, "height", tile, "imageheight") != 0
                             ? -1
                             : 0;
            }
        }
        if (rc != 0)
            goto fail;
    }
    return ts;
fail:
    cJSON_Delete(ts);
    return NULL;
}

static cJSON *pd__map(const xmlNode *n)
{
    cJSON *map = cJSON_CreateObject();
    if (!map || pd__copy_attrs(n, map) != 0 ||
        pd__add(map, "type", cJSON_CreateString("map")) != 0 || !pd__layers_into(n, map))
        goto fail;
    for (const xmlNode *c = n->children; c; c = c->next) {
        int rc = 0;
        if (pd__name_is(c, "tileset"))
            rc = pd__append(pd__array(map, "tilesets"), pd__tileset(c));
        else if (pd__name_is(c, "properties"))
            rc = pd__add(map, "properties", pd__properties(c));
        if (rc != 0)
            goto fail;
    }
    return map;
fail:
    cJSON_Delete(map);
    return NULL;
}

/* Set in a parser's _private when its document declared a DOCTYPE. */
static const char pd__doctype_seen = 1;

/* The SAX call for <!DOCTYPE ...>: the parse stops here, before any of its
 * ENTITY declarations is read. Tiled never writes a DOCTYPE, and entities
 * are the one way a few hundred bytes of XML expand into gigabytes (the
 * "billion laughs"), which XML_PARSE_HUGE would otherwise let through. */
static void pd__refuse_doctype(void *ctx, const xmlChar *name, const xmlChar *external_id,
                               const xmlChar *system_id)
{
    (void)name;
    (void)external_id;
    (void)system_id;
    xmlParserCtxtPtr ctxt = ctx;
    ctxt->_private = (void *)&pd__doctype_seen;
    xmlStopParser(ctxt);
}

cJSON *pd_tmx_to_json(const char *buf, size_t len, char *err, size_t errlen)
{
    if (err && errlen)
        err[0] = '\0';
    if (len > (size_t)INT32_MAX) {
        if (err && errlen)
            snprintf(err, errlen, "1:1: invalid XML: larger than 2 GiB");
        return NULL;
    }
    xmlParserCtxtPtr ctxt = xmlNewParserCtxt();
    if (!ctxt) {
        if (err && errlen)
            snprintf(err, errlen, "out of memory");
        return NULL;
    }
    /* NONET: never fetch a DTD; entities are left unexpanded (no NOENT), so
     * an entity cannot read a local file, and a DOCTYPE stops the parse
     * (pd__refuse_doctype), so none is ever declared. HUGE lifts libxml2's
     * 10 MB cap on one text node: a CSV layer of a 4096 x 4096 map is
     * larger, and the cells cap in pd_tiled bounds what the text may
     * decode to. */
    ctxt->sax->internalSubset = pd__refuse_doctype;
    xmlDocPtr doc = xmlCtxtReadMemory(ctxt, buf, (int)len, NULL, NULL,
                                      XML_PARSE_NONET | XML_PARSE_HUGE | XML_PARSE_NOERROR |
                                          XML_PARSE_NOWARNING);
    cJSON *out = NULL;
    if (ctxt->_private == &pd__doctype_seen) {
        if (err && errlen)
            snprintf(err, errlen, "%d:1: a DOCTYPE is refused: maps hold no DTD or ENTITY (Tiled never writes one)",
                     ctxt->input ? ctxt->input->line : 1);
        xmlFreeDoc(doc);
        xmlFreeParserCtxt(ctxt);
        return NULL;
    }
    if (!doc) {
        const xmlError *e = xmlCtxtGetLastError(ctxt);
        if (err && errlen) {
            char msg[PD_REASON_SHORT_MAX] = "malformed document";
            if (e && e->message) {
                snprintf(msg, sizeof msg, "%s", e->message);
                size_t m = strlen(msg);
                while (m && (msg[m - 1] == '\n' || msg[m - 1] == ' '))
                    msg[--m] = '\0';
            }
            snprintf(err, errlen, "%d:%d: invalid XML: %s", e ? e->line : 1, e ? e->int2 : 1, msg);
        }
        xmlFreeParserCtxt(ctxt);
        return NULL;
    }
    const xmlNode *root = xmlDocGetRootElement(doc);
    if (root && pd__name_is(root, "map"))
        out = pd__map(root);
    else if (root && pd__name_is(root, "tileset"))
        out = pd__tileset(root);
    else if (err && errlen)
        snprintf(err, errlen, "the root element is <%s>, not <map> or <tileset>",
                 root ? (const char *)root->name : "");
    if (!out && root && (pd__name_is(root, "map") || pd__name_is(root, "tileset")) && err && errlen)
        snprintf(err, errlen, "out of memory");
    xmlFreeDoc(doc);
    xmlFreeParserCtxt(ctxt);
    return out;
}
