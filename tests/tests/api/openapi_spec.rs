//! The served `/openapi.json` is a valid OpenAPI 3.1 document — checked against the
//! official schema vendored in `tests/data/` (no network: any reference outside it and
//! the bundled draft 2020-12 meta-schemas fails the test) — with a bearer security scheme,
//! and each operation's `security` and `x-roles` are what the service really enforces.

use jsonschema::Draft;
use pm_tests::{all_tokens, on_both_backends, TestDb, TestService, ADMIN, ANALYST, INGRESS, LLM};
use serde_json::{json, Value};

use crate::documented::assert_answer;
use crate::offline_schema::{errors, validator};

/// The official OpenAPI 3.1 schema (see `tests/data/README.md`).
const OAS_3_1: &str = include_str!("../../data/openapi-3.1-schema.json");

/// Every `(method, path, operation)` of the document.
fn operations(doc: &Value) -> Vec<(String, String, Value)> {
    let mut all = Vec::new();
    for (path, item) in doc["paths"].as_object().expect("paths") {
        for (method, op) in item.as_object().expect("path item") {
            all.push((method.clone(), path.clone(), op.clone()));
        }
    }
    all
}

fn roles_of(op: &Value) -> Vec<String> {
    op["x-roles"]
        .as_array()
        .unwrap_or_else(|| panic!("no x-roles in {op}"))
        .iter()
        .map(|r| r.as_str().expect("a role name").to_string())
        .collect()
}

async fn served_document_is_valid_openapi_3_1(db: TestDb) {
    let svc = TestService::start(&db, "").await;
    let doc = svc.get(None, "/openapi.json").await.json;
    let schema: Value = serde_json::from_str(OAS_3_1).expect("the vendored schema is JSON");
    let openapi = validator(&schema, Draft::Draft202012, "the OpenAPI 3.1 schema");
    let errors = errors(&openapi, &doc);
    assert!(errors.is_empty(), "not OpenAPI 3.1: {errors:#?}");
    assert_eq!(doc["openapi"].as_str().map(|v| &v[..4]), Some("3.1."));
    // The Schema Objects themselves are JSON Schema 2020-12 (the OAS schema leaves them open).
    for (name, schema) in doc["components"]["schemas"].as_object().expect("schemas") {
        let mut root = schema.clone();
        root["components"] = doc["components"].clone();
        validator(&root, Draft::Draft202012, &format!("schema {name}"));
    }
    assert_eq!(
        doc["components"]["securitySchemes"]["bearer"],
        json!({"type": "http", "scheme": "bearer", "description": doc["components"]["securitySchemes"]["bearer"]["description"]})
    );
    assert_eq!(
        doc["components"]["securitySchemes"]["jwt"],
        json!({"type": "http", "scheme": "bearer", "bearerFormat": "JWT",
               "description": doc["components"]["securitySchemes"]["jwt"]["description"]})
    );
    let mut open = Vec::new();
    for (method, path, op) in operations(&doc) {
        let roles = roles_of(&op);
        let security = op["security"]
            .as_array()
            .expect("security on every operation");
        if roles.is_empty() {
            assert!(security.is_empty(), "{method} {path}");
            open.push(path.clone());
        } else {
            assert_eq!(
                security,
                &vec![json!({"bearer": []}), json!({"jwt": []})],
                "{method} {path}: either kind of bearer token"
            );
            assert_eq!(
                roles[0], "admin",
                "{method} {path}: admin may do everything"
            );
            let description = op["description"].as_str().unwrap_or_default();
            assert!(
                description.ends_with(&format!("Roles: {}.", roles.join(", "))),
                "{method} {path}: {description}"
            );
            assert!(op["responses"]["401"].is_object(), "{method} {path}");
        }
        for (status, response) in op["responses"].as_object().expect("responses") {
            if status.starts_with('4') || (status.starts_with('5') && path != "/readyz") {
                let content = response["content"].as_object().expect("error content");
                assert_eq!(
                    content.keys().collect::<Vec<_>>(),
                    ["application/problem+json"],
                    "{method} {path} {status}"
                );
            }
        }
    }
    open.sort();
    assert_eq!(
        open,
        [
            "/asyncapi.json",
            "/healthz",
            "/metrics",
            "/openapi.json",
            "/readyz"
        ]
    );
    let events = &doc["paths"]["/v1/events"]["get"];
    let content = &events["responses"]["200"]["content"];
    assert!(
        content["application/json"]["schema"].is_object(),
        "{content}"
    );
    assert!(
        content["text/event-stream"]["schema"].is_object(),
        "{content}"
    );
    let last_event_id = events["parameters"]
        .as_array()
        .expect("parameters")
        .iter()
        .find(|p| p["name"] == "Last-Event-ID")
        .expect("Last-Event-ID documented");
    assert_eq!(last_event_id["in"], "header");
    svc.stop().await;
}

/// `path` with every `{parameter}` filled with something that names nothing.
fn concrete(path: &str) -> String {
    path.split('/')
        .map(|segment| match segment {
            "{name}" => "no_such",
            s if s.starts_with('{') => "00000000-0000-0000-0000-000000000000",
            s => s,
        })
        .collect::<Vec<_>>()
        .join("/")
}

async fn documented_roles_are_enforced(db: TestDb) {
    let svc = TestService::start(&db, &all_tokens()).await;
    let doc = svc.get(None, "/openapi.json").await.json;
    let tokens = [
        ("admin", ADMIN),
        ("ingress", INGRESS),
        ("llm", LLM),
        ("analyst", ANALYST),
    ];
    for (method, path, op) in operations(&doc) {
        let roles = roles_of(&op);
        let url = format!("{}{}", svc.base, concrete(&path));
        let call = |token: Option<&str>| {
            let mut req = match method.as_str() {
                "post" => svc.client.post(&url).json(&json!({})),
                "put" => svc.client.put(&url).json(&json!({})),
                "delete" => svc.client.delete(&url),
                _ => svc.client.get(&url),
            };
            if let Some(token) = token {
                req = req.bearer_auth(token);
            }
            async move { crate::support::buffer(req.send().await.expect("sent")).await }
        };
        let anonymous = call(None).await;
        assert_answer(&doc, &method, &path, &anonymous);
        assert_eq!(
            anonymous.status == 401,
            !roles.is_empty(),
            "{method} {path} without a token: {}",
            anonymous.text
        );
        for (role, token) in tokens {
            let r = call(Some(token)).await;
            assert_answer(&doc, &method, &path, &r);
            let allowed = roles.is_empty() || roles.iter().any(|r| r == role);
            assert_eq!(
                r.status != 403,
                allowed,
                "{method} {path} as {role} (x-roles {roles:?}): {} {}",
                r.status,
                r.text
            );
        }
    }
    svc.stop().await;
}

on_both_backends!(
    served_document_is_valid_openapi_3_1,
    documented_roles_are_enforced
);
