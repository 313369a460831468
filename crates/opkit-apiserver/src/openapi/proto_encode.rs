//! Encoding of the swagger 2.0 JSON document as gnostic's `openapi.v2.Document` protobuf
//! (what kubectl asks for with `application/com.github.proto-openapi.spec.v2@v1.0+protobuf`).
//! Free-form values (vendor extensions, defaults, enums, examples) travel as YAML text; JSON is
//! valid YAML, so they are written as compact JSON.

use prost::Message;
use serde_json::{Map, Value};

use super::proto::{
    AdditionalPropertiesItem, Any, ApiKeySecurity, BodyParameter, Definitions, Document, ExternalDocs, Info, ItemsItem,
    NamedAny, NamedPathItem, NamedResponseValue, NamedSchema, NamedSecurityDefinitionsItem, NamedStringArray,
    NonBodyParameter, Operation, Parameter, ParametersItem, PathItem, Paths, PrimitivesItems, Properties,
    QueryParameterSubSchema, Response, ResponseValue, Responses, Schema, SchemaItem, SecurityDefinitions,
    SecurityDefinitionsItem, SecurityRequirement, SimpleParameter, StringArray, TypeItem, additional_properties_item,
    non_body_parameter, parameter, parameters_item, response_value, schema_item, security_definitions_item,
};

/// Encodes a swagger 2.0 document (as produced by [`super::v2_document`]) as a gnostic
/// `openapi.v2.Document` protobuf message. Unknown or malformed parts are skipped; vendor
/// extensions (`x-...`) are kept on the document, paths, operations and schemas.
pub(crate) fn v2_protobuf(doc: &Value) -> Vec<u8> {
    document(doc).encode_to_vec()
}

/// Converts the JSON document into the message structs.
pub(crate) fn document(doc: &Value) -> Document {
    Document {
        swagger: string(doc, "swagger"),
        info: doc.get("info").map(|i| Info {
            title: string(i, "title"),
            version: string(i, "version"),
            description: string(i, "description"),
            terms_of_service: string(i, "termsOfService"),
            vendor_extension: extensions(i),
        }),
        host: string(doc, "host"),
        base_path: string(doc, "basePath"),
        schemes: strings(doc, "schemes"),
        consumes: strings(doc, "consumes"),
        produces: strings(doc, "produces"),
        paths: doc.get("paths").and_then(Value::as_object).map(|ps| Paths {
            vendor_extension: extensions_of(ps),
            path: ps
                .iter()
                .filter(|(k, _)| !k.starts_with("x-"))
                .map(|(name, item)| NamedPathItem { name: name.clone(), value: Some(path_item(item)) })
                .collect(),
        }),
        definitions: doc
            .get("definitions")
            .and_then(Value::as_object)
            .map(|defs| Definitions { additional_properties: named_schemas(defs) }),
        security: doc
            .get("security")
            .and_then(Value::as_array)
            .map(|list| list.iter().map(security_requirement).collect())
            .unwrap_or_default(),
        security_definitions: doc.get("securityDefinitions").and_then(Value::as_object).map(|defs| {
            SecurityDefinitions {
                additional_properties: defs
                    .iter()
                    .filter(|(_, d)| d.get("type").and_then(Value::as_str) == Some("apiKey"))
                    .map(|(name, d)| NamedSecurityDefinitionsItem {
                        name: name.clone(),
                        value: Some(SecurityDefinitionsItem {
                            oneof: Some(security_definitions_item::Oneof::ApiKeySecurity(ApiKeySecurity {
                                r#type: string(d, "type"),
                                name: string(d, "name"),
                                r#in: string(d, "in"),
                                description: string(d, "description"),
                                vendor_extension: extensions(d),
                            })),
                        }),
                    })
                    .collect(),
            }
        }),
        tags: Vec::new(),
        external_docs: doc.get("externalDocs").map(external_docs),
        vendor_extension: extensions(doc),
    }
}

fn string(v: &Value, key: &str) -> String {
    v.get(key).and_then(Value::as_str).unwrap_or_default().to_string()
}

fn strings(v: &Value, key: &str) -> Vec<String> {
    v.get(key)
        .and_then(Value::as_array)
        .map(|a| a.iter().filter_map(Value::as_str).map(str::to_string).collect())
        .unwrap_or_default()
}

fn boolean(v: &Value, key: &str) -> bool {
    v.get(key).and_then(Value::as_bool).unwrap_or(false)
}

fn float(v: &Value, key: &str) -> f64 {
    v.get(key).and_then(Value::as_f64).unwrap_or(0.0)
}

fn int(v: &Value, key: &str) -> i64 {
    v.get(key)
        .and_then(|n| n.as_i64().or_else(|| n.as_u64().map(|u| i64::try_from(u).unwrap_or(i64::MAX))))
        .unwrap_or(0)
}

/// A free-form value as YAML text.
fn any(v: &Value) -> Any {
    Any { yaml: v.to_string() }
}

fn extensions(v: &Value) -> Vec<NamedAny> {
    v.as_object().map(extensions_of).unwrap_or_default()
}

fn extensions_of(map: &Map<String, Value>) -> Vec<NamedAny> {
    map.iter()
        .filter(|(k, _)| k.starts_with("x-"))
        .map(|(k, v)| NamedAny { name: k.clone(), value: Some(any(v)) })
        .collect()
}

fn external_docs(v: &Value) -> ExternalDocs {
    ExternalDocs { description: string(v, "description"), url: string(v, "url"), vendor_extension: extensions(v) }
}

fn security_requirement(v: &Value) -> SecurityRequirement {
    SecurityRequirement {
        additional_properties: v
            .as_object()
            .map(|m| {
                m.iter()
                    .map(|(name, scopes)| NamedStringArray {
                        name: name.clone(),
                        value: Some(StringArray {
                            value: scopes
                                .as_array()
                                .map(|a| a.iter().filter_map(Value::as_str).map(str::to_string).collect())
                                .unwrap_or_default(),
                        }),
                    })
                    .collect()
            })
            .unwrap_or_default(),
    }
}

fn path_item(v: &Value) -> PathItem {
    let op = |m: &str| v.get(m).map(operation);
    PathItem {
        _ref: string(v, "$ref"),
        get: op("get"),
        put: op("put"),
        post: op("post"),
        delete: op("delete"),
        options: op("options"),
        head: op("head"),
        patch: op("patch"),
        parameters: parameters(v),
        vendor_extension: extensions(v),
    }
}

fn operation(v: &Value) -> Operation {
    Operation {
        tags: strings(v, "tags"),
        summary: string(v, "summary"),
        description: string(v, "description"),
        external_docs: v.get("externalDocs").map(external_docs),
        operation_id: string(v, "operationId"),
        produces: strings(v, "produces"),
        consumes: strings(v, "consumes"),
        parameters: parameters(v),
        responses: v.get("responses").and_then(Value::as_object).map(|rs| Responses {
            response_code: rs
                .iter()
                .filter(|(k, _)| !k.starts_with("x-"))
                .map(|(code, r)| NamedResponseValue {
                    name: code.clone(),
                    value: Some(ResponseValue {
                        oneof: Some(response_value::Oneof::Response(Response {
                            description: string(r, "description"),
                            schema: r
                                .get("schema")
                                .map(|s| SchemaItem { oneof: Some(schema_item::Oneof::Schema(schema(s))) }),
                            vendor_extension: extensions(r),
                        })),
                    }),
                })
                .collect(),
            vendor_extension: extensions_of(rs),
        }),
        schemes: strings(v, "schemes"),
        deprecated: boolean(v, "deprecated"),
        security: v
            .get("security")
            .and_then(Value::as_array)
            .map(|l| l.iter().map(security_requirement).collect())
            .unwrap_or_default(),
        vendor_extension: extensions(v),
    }
}

fn parameters(v: &Value) -> Vec<ParametersItem> {
    v.get("parameters")
        .and_then(Value::as_array)
        .map(|ps| ps.iter().filter_map(parameter).collect())
        .unwrap_or_default()
}

fn primitives_items(v: &Value) -> PrimitivesItems {
    PrimitivesItems {
        r#type: string(v, "type"),
        format: string(v, "format"),
        items: v.get("items").map(|i| Box::new(primitives_items(i))),
        collection_format: string(v, "collectionFormat"),
    }
}

fn enum_values(v: &Value) -> Vec<Any> {
    v.get("enum").and_then(Value::as_array).map(|e| e.iter().map(any).collect()).unwrap_or_default()
}

fn parameter(v: &Value) -> Option<ParametersItem> {
    if let Some(r) = v.get("$ref").and_then(Value::as_str) {
        return Some(ParametersItem {
            oneof: Some(parameters_item::Oneof::JsonReference(super::proto::JsonReference {
                _ref: r.to_string(),
                description: string(v, "description"),
            })),
        });
    }
    let location = v.get("in").and_then(Value::as_str)?;
    let p = match location {
        "body" => parameter::Oneof::BodyParameter(BodyParameter {
            description: string(v, "description"),
            name: string(v, "name"),
            r#in: location.to_string(),
            required: boolean(v, "required"),
            schema: v.get("schema").map(schema),
            vendor_extension: extensions(v),
        }),
        "query" => parameter::Oneof::NonBodyParameter(NonBodyParameter {
            oneof: Some(non_body_parameter::Oneof::QueryParameterSubSchema(QueryParameterSubSchema {
                required: boolean(v, "required"),
                r#in: location.to_string(),
                description: string(v, "description"),
                name: string(v, "name"),
                allow_empty_value: boolean(v, "allowEmptyValue"),
                r#type: string(v, "type"),
                format: string(v, "format"),
                items: v.get("items").map(primitives_items),
                collection_format: string(v, "collectionFormat"),
                default: v.get("default").map(any),
                unique_items: boolean(v, "uniqueItems"),
                r#enum: enum_values(v),
                vendor_extension: extensions(v),
            })),
        }),
        "path" | "header" => {
            let simple = SimpleParameter {
                required: boolean(v, "required"),
                r#in: location.to_string(),
                description: string(v, "description"),
                name: string(v, "name"),
                r#type: string(v, "type"),
                format: string(v, "format"),
                items: v.get("items").map(primitives_items),
                collection_format: string(v, "collectionFormat"),
                default: v.get("default").map(any),
                unique_items: boolean(v, "uniqueItems"),
                r#enum: enum_values(v),
            };
            let oneof = if location == "path" {
                non_body_parameter::Oneof::PathParameterSubSchema(simple)
            } else {
                non_body_parameter::Oneof::HeaderParameterSubSchema(simple)
            };
            parameter::Oneof::NonBodyParameter(NonBodyParameter { oneof: Some(oneof) })
        }
        _ => return None,
    };
    Some(ParametersItem { oneof: Some(parameters_item::Oneof::Parameter(Parameter { oneof: Some(p) })) })
}

fn named_schemas(map: &Map<String, Value>) -> Vec<NamedSchema> {
    map.iter().map(|(name, s)| NamedSchema { name: name.clone(), value: Some(schema(s)) }).collect()
}

/// Converts one JSON schema object.
pub(crate) fn schema(v: &Value) -> Schema {
    let ty = match v.get("type") {
        Some(Value::String(t)) => Some(TypeItem { value: vec![t.clone()] }),
        Some(Value::Array(ts)) => {
            Some(TypeItem { value: ts.iter().filter_map(Value::as_str).map(str::to_string).collect() })
        }
        _ => None,
    };
    let items = match v.get("items") {
        Some(Value::Array(list)) => Some(ItemsItem { schema: list.iter().map(schema).collect() }),
        Some(s @ Value::Object(_)) => Some(ItemsItem { schema: vec![schema(s)] }),
        _ => None,
    };
    let additional = match v.get("additionalProperties") {
        Some(Value::Bool(b)) => Some(additional_properties_item::Oneof::Boolean(*b)),
        Some(s @ Value::Object(_)) => Some(additional_properties_item::Oneof::Schema(Box::new(schema(s)))),
        _ => None,
    };
    Schema {
        _ref: string(v, "$ref"),
        format: string(v, "format"),
        title: string(v, "title"),
        description: string(v, "description"),
        default: v.get("default").map(any),
        multiple_of: float(v, "multipleOf"),
        maximum: float(v, "maximum"),
        exclusive_maximum: boolean(v, "exclusiveMaximum"),
        minimum: float(v, "minimum"),
        exclusive_minimum: boolean(v, "exclusiveMinimum"),
        max_length: int(v, "maxLength"),
        min_length: int(v, "minLength"),
        pattern: string(v, "pattern"),
        max_items: int(v, "maxItems"),
        min_items: int(v, "minItems"),
        unique_items: boolean(v, "uniqueItems"),
        max_properties: int(v, "maxProperties"),
        min_properties: int(v, "minProperties"),
        required: strings(v, "required"),
        r#enum: enum_values(v),
        additional_properties: additional.map(|o| Box::new(AdditionalPropertiesItem { oneof: Some(o) })),
        r#type: ty,
        items,
        all_of: v.get("allOf").and_then(Value::as_array).map(|l| l.iter().map(schema).collect()).unwrap_or_default(),
        properties: v
            .get("properties")
            .and_then(Value::as_object)
            .map(|ps| Properties { additional_properties: named_schemas(ps) }),
        discriminator: string(v, "discriminator"),
        read_only: boolean(v, "readOnly"),
        external_docs: v.get("externalDocs").map(external_docs),
        example: v.get("example").map(any),
        vendor_extension: extensions(v),
    }
}
