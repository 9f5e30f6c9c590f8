/* The draft 2020-12 meta-schemas (https://json-schema.org/draft/2020-12/),
 * embedded so "$schema" and "$ref" to them resolve without a network.
 * Generated once from the published documents (minified); do not edit. */
#include "jsonschema/internal.h"

#include <stddef.h>
#include <string.h>
static const char meta_0[] =
    "{\"$schema\":\"https://json-schema.org/draft/2020-12/schema\",\"$id\":\"https:/"
    "/json-schema.org/draft/2020-12/schema\",\"$vocabulary\":{\"https://json-sche"
    "ma.org/draft/2020-12/vocab/core\":true,\"https://json-schema.org/draft/202"
    "0-12/vocab/applicator\":true,\"https://json-schema.org/draft/2020-12/vocab"
    "/unevaluated\":true,\"https://json-schema.org/draft/2020-12/vocab/validati"
    "on\":true,\"https://json-schema.org/draft/2020-12/vocab/meta-data\":true,\"h"
    "ttps://json-schema.org/draft/2020-12/vocab/format-annotation\":true,\"http"
    "s://json-schema.org/draft/2020-12/vocab/content\":true},\"$dynamicAnchor\":"
    "\"meta\",\"title\":\"Core and Validation specifications meta-schema\",\"allOf\":"
    "[{\"$ref\":\"meta/core\"},{\"$ref\":\"meta/applicator\"},{\"$ref\":\"meta/unevaluat"
    "ed\"},{\"$ref\":\"meta/validation\"},{\"$ref\":\"meta/meta-data\"},{\"$ref\":\"meta/"
    "format-annotation\"},{\"$ref\":\"meta/content\"}],\"type\":[\"object\",\"boolean\"]"
    ",\"$comment\":\"This meta-schema also defines keywords that have appeared i"
    "n previous drafts in order to prevent incompatible extensions as they re"
    "main in common use.\",\"properties\":{\"definitions\":{\"$comment\":\"\\\"definiti"
    "ons\\\" has been replaced by \\\"$defs\\\".\",\"type\":\"object\",\"additionalProper"
    "ties\":{\"$dynamicRef\":\"#meta\"},\"deprecated\":true,\"default\":{}},\"dependenc"
    "ies\":{\"$comment\":\"\\\"dependencies\\\" has been split and replaced by \\\"depe"
    "ndentSchemas\\\" and \\\"dependentRequired\\\" in order to serve their differi"
    "ng semantics.\",\"type\":\"object\",\"additionalProperties\":{\"anyOf\":[{\"$dynam"
    "icRef\":\"#meta\"},{\"$ref\":\"meta/validation#/$defs/stringArray\"}]},\"depreca"
    "ted\":true,\"default\":{}},\"$recursiveAnchor\":{\"$comment\":\"\\\"$recursiveAnch"
    "or\\\" has been replaced by \\\"$dynamicAnchor\\\".\",\"$ref\":\"meta/core#/$defs/"
    "anchorString\",\"deprecated\":true},\"$recursiveRef\":{\"$comment\":\"\\\"$recursi"
    "veRef\\\" has been replaced by \\\"$dynamicRef\\\".\",\"$ref\":\"meta/core#/$defs/"
    "uriReferenceString\",\"deprecated\":true}}}";

static const char meta_1[] =
    "{\"$schema\":\"https://json-schema.org/draft/2020-12/schema\",\"$id\":\"https:/"
    "/json-schema.org/draft/2020-12/meta/applicator\",\"$vocabulary\":{\"https://"
    "json-schema.org/draft/2020-12/vocab/applicator\":true},\"$dynamicAnchor\":\""
    "meta\",\"title\":\"Applicator vocabulary meta-schema\",\"type\":[\"object\",\"bool"
    "ean\"],\"properties\":{\"prefixItems\":{\"$ref\":\"#/$defs/schemaArray\"},\"items\""
    ":{\"$dynamicRef\":\"#meta\"},\"contains\":{\"$dynamicRef\":\"#meta\"},\"additionalP"
    "roperties\":{\"$dynamicRef\":\"#meta\"},\"properties\":{\"type\":\"object\",\"additi"
    "onalProperties\":{\"$dynamicRef\":\"#meta\"},\"default\":{}},\"patternProperties"
    "\":{\"type\":\"object\",\"additionalProperties\":{\"$dynamicRef\":\"#meta\"},\"prope"
    "rtyNames\":{\"format\":\"regex\"},\"default\":{}},\"dependentSchemas\":{\"type\":\"o"
    "bject\",\"additionalProperties\":{\"$dynamicRef\":\"#meta\"},\"default\":{}},\"pro"
    "pertyNames\":{\"$dynamicRef\":\"#meta\"},\"if\":{\"$dynamicRef\":\"#meta\"},\"then\":"
    "{\"$dynamicRef\":\"#meta\"},\"else\":{\"$dynamicRef\":\"#meta\"},\"allOf\":{\"$ref\":\""
    "#/$defs/schemaArray\"},\"anyOf\":{\"$ref\":\"#/$defs/schemaArray\"},\"oneOf\":{\"$"
    "ref\":\"#/$defs/schemaArray\"},\"not\":{\"$dynamicRef\":\"#meta\"}},\"$defs\":{\"sch"
    "emaArray\":{\"type\":\"array\",\"minItems\":1,\"items\":{\"$dynamicRef\":\"#meta\"}}}"
    "}";

static const char meta_2[] =
    "{\"$schema\":\"https://json-schema.org/draft/2020-12/schema\",\"$id\":\"https:/"
    "/json-schema.org/draft/2020-12/meta/content\",\"$vocabulary\":{\"https://jso"
    "n-schema.org/draft/2020-12/vocab/content\":true},\"$dynamicAnchor\":\"meta\","
    "\"title\":\"Content vocabulary meta-schema\",\"type\":[\"object\",\"boolean\"],\"pr"
    "operties\":{\"contentEncoding\":{\"type\":\"string\"},\"contentMediaType\":{\"type"
    "\":\"string\"},\"contentSchema\":{\"$dynamicRef\":\"#meta\"}}}";

static const char meta_3[] =
    "{\"$schema\":\"https://json-schema.org/draft/2020-12/schema\",\"$id\":\"https:/"
    "/json-schema.org/draft/2020-12/meta/core\",\"$vocabulary\":{\"https://json-s"
    "chema.org/draft/2020-12/vocab/core\":true},\"$dynamicAnchor\":\"meta\",\"title"
    "\":\"Core vocabulary meta-schema\",\"type\":[\"object\",\"boolean\"],\"properties\""
    ":{\"$id\":{\"$ref\":\"#/$defs/uriReferenceString\",\"$comment\":\"Non-empty fragm"
    "ents not allowed.\",\"pattern\":\"^[^#]*#?$\"},\"$schema\":{\"$ref\":\"#/$defs/uri"
    "String\"},\"$ref\":{\"$ref\":\"#/$defs/uriReferenceString\"},\"$anchor\":{\"$ref\":"
    "\"#/$defs/anchorString\"},\"$dynamicRef\":{\"$ref\":\"#/$defs/uriReferenceStrin"
    "g\"},\"$dynamicAnchor\":{\"$ref\":\"#/$defs/anchorString\"},\"$vocabulary\":{\"typ"
    "e\":\"object\",\"propertyNames\":{\"$ref\":\"#/$defs/uriString\"},\"additionalProp"
    "erties\":{\"type\":\"boolean\"}},\"$comment\":{\"type\":\"string\"},\"$defs\":{\"type\""
    ":\"object\",\"additionalProperties\":{\"$dynamicRef\":\"#meta\"}}},\"$defs\":{\"anc"
    "horString\":{\"type\":\"string\",\"pattern\":\"^[A-Za-z_][-A-Za-z0-9._]*$\"},\"uri"
    "String\":{\"type\":\"string\",\"format\":\"uri\"},\"uriReferenceString\":{\"type\":\"s"
    "tring\",\"format\":\"uri-reference\"}}}";

static const char meta_4[] =
    "{\"$schema\":\"https://json-schema.org/draft/2020-12/schema\",\"$id\":\"https:/"
    "/json-schema.org/draft/2020-12/meta/format-annotation\",\"$vocabulary\":{\"h"
    "ttps://json-schema.org/draft/2020-12/vocab/format-annotation\":true},\"$dy"
    "namicAnchor\":\"meta\",\"title\":\"Format vocabulary meta-schema for annotatio"
    "n results\",\"type\":[\"object\",\"boolean\"],\"properties\":{\"format\":{\"type\":\"s"
    "tring\"}}}";

static const char meta_5[] =
    "{\"$schema\":\"https://json-schema.org/draft/2020-12/schema\",\"$id\":\"https:/"
    "/json-schema.org/draft/2020-12/meta/meta-data\",\"$vocabulary\":{\"https://j"
    "son-schema.org/draft/2020-12/vocab/meta-data\":true},\"$dynamicAnchor\":\"me"
    "ta\",\"title\":\"Meta-data vocabulary meta-schema\",\"type\":[\"object\",\"boolean"
    "\"],\"properties\":{\"title\":{\"type\":\"string\"},\"description\":{\"type\":\"string"
    "\"},\"default\":true,\"deprecated\":{\"type\":\"boolean\",\"default\":false},\"readO"
    "nly\":{\"type\":\"boolean\",\"default\":false},\"writeOnly\":{\"type\":\"boolean\",\"d"
    "efault\":false},\"examples\":{\"type\":\"array\",\"items\":true}}}";

static const char meta_6[] =
    "{\"$schema\":\"https://json-schema.org/draft/2020-12/schema\",\"$id\":\"https:/"
    "/json-schema.org/draft/2020-12/meta/unevaluated\",\"$vocabulary\":{\"https:/"
    "/json-schema.org/draft/2020-12/vocab/unevaluated\":true},\"$dynamicAnchor\""
    ":\"meta\",\"title\":\"Unevaluated applicator vocabulary meta-schema\",\"type\":["
    "\"object\",\"boolean\"],\"properties\":{\"unevaluatedItems\":{\"$dynamicRef\":\"#me"
    "ta\"},\"unevaluatedProperties\":{\"$dynamicRef\":\"#meta\"}}}";

static const char meta_7[] =
    "{\"$schema\":\"https://json-schema.org/draft/2020-12/schema\",\"$id\":\"https:/"
    "/json-schema.org/draft/2020-12/meta/validation\",\"$vocabulary\":{\"https://"
    "json-schema.org/draft/2020-12/vocab/validation\":true},\"$dynamicAnchor\":\""
    "meta\",\"title\":\"Validation vocabulary meta-schema\",\"type\":[\"object\",\"bool"
    "ean\"],\"properties\":{\"type\":{\"anyOf\":[{\"$ref\":\"#/$defs/simpleTypes\"},{\"ty"
    "pe\":\"array\",\"items\":{\"$ref\":\"#/$defs/simpleTypes\"},\"minItems\":1,\"uniqueI"
    "tems\":true}]},\"const\":true,\"enum\":{\"type\":\"array\",\"items\":true},\"multipl"
    "eOf\":{\"type\":\"number\",\"exclusiveMinimum\":0},\"maximum\":{\"type\":\"number\"},"
    "\"exclusiveMaximum\":{\"type\":\"number\"},\"minimum\":{\"type\":\"number\"},\"exclus"
    "iveMinimum\":{\"type\":\"number\"},\"maxLength\":{\"$ref\":\"#/$defs/nonNegativeIn"
    "teger\"},\"minLength\":{\"$ref\":\"#/$defs/nonNegativeIntegerDefault0\"},\"patte"
    "rn\":{\"type\":\"string\",\"format\":\"regex\"},\"maxItems\":{\"$ref\":\"#/$defs/nonNe"
    "gativeInteger\"},\"minItems\":{\"$ref\":\"#/$defs/nonNegativeIntegerDefault0\"}"
    ",\"uniqueItems\":{\"type\":\"boolean\",\"default\":false},\"maxContains\":{\"$ref\":"
    "\"#/$defs/nonNegativeInteger\"},\"minContains\":{\"$ref\":\"#/$defs/nonNegative"
    "Integer\",\"default\":1},\"maxProperties\":{\"$ref\":\"#/$defs/nonNegativeIntege"
    "r\"},\"minProperties\":{\"$ref\":\"#/$defs/nonNegativeIntegerDefault0\"},\"requi"
    "red\":{\"$ref\":\"#/$defs/stringArray\"},\"dependentRequired\":{\"type\":\"object\""
    ",\"additionalProperties\":{\"$ref\":\"#/$defs/stringArray\"}}},\"$defs\":{\"nonNe"
    "gativeInteger\":{\"type\":\"integer\",\"minimum\":0},\"nonNegativeIntegerDefault"
    "0\":{\"$ref\":\"#/$defs/nonNegativeInteger\",\"default\":0},\"simpleTypes\":{\"enu"
    "m\":[\"array\",\"boolean\",\"integer\",\"null\",\"number\",\"object\",\"string\"]},\"str"
    "ingArray\":{\"type\":\"array\",\"items\":{\"type\":\"string\"},\"uniqueItems\":true,\""
    "default\":[]}}}";

static const char meta_fa[] =
    "{\"$schema\":\"https://json-schema.org/draft/2020-12/schema\",\"$id\":\"https:/"
    "/json-schema.org/draft/2020-12/meta/format-assertion\",\"$vocabulary\":{\"ht"
    "tps://json-schema.org/draft/2020-12/vocab/format-assertion\":true},\"$dyna"
    "micAnchor\":\"meta\",\"title\":\"Format vocabulary meta-schema for assertion r"
    "esults\",\"type\":[\"object\",\"boolean\"],\"properties\":{\"format\":{\"type\":\"stri"
    "ng\"}}}";

static const struct {
  const char *uri;
  const char *text;
  size_t len;
} metaschemas[] = {
    {"https://json-schema.org/draft/2020-12/schema", meta_0, sizeof(meta_0) - 1},
    {"https://json-schema.org/draft/2020-12/meta/applicator", meta_1, sizeof(meta_1) - 1},
    {"https://json-schema.org/draft/2020-12/meta/content", meta_2, sizeof(meta_2) - 1},
    {"https://json-schema.org/draft/2020-12/meta/core", meta_3, sizeof(meta_3) - 1},
    {"https://json-schema.org/draft/2020-12/meta/format-assertion", meta_fa, sizeof(meta_fa) - 1},
    {"https://json-schema.org/draft/2020-12/meta/format-annotation", meta_4, sizeof(meta_4) - 1},
    {"https://json-schema.org/draft/2020-12/meta/meta-data", meta_5, sizeof(meta_5) - 1},
    {"https://json-schema.org/draft/2020-12/meta/unevaluated", meta_6, sizeof(meta_6) - 1},
    {"https://json-schema.org/draft/2020-12/meta/validation", meta_7, sizeof(meta_7) - 1},
};

const char *js_metaschema_lookup(const char *uri, size_t *len)
{
  for (size_t i = 0; i < sizeof(metaschemas) / sizeof(metaschemas[0]); i++) {
    if (strcmp(metaschemas[i].uri, uri) == 0) {
      *len = metaschemas[i].len;
      return metaschemas[i].text;
    }
  }
  return NULL;
}
