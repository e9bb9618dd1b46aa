//! Who is calling, and what they may do (docs/design.md, "Who may do what"). API Gateway's
//! authorizer states the caller (a JWT's claims and scopes, or the IAM principal); this module
//! turns that into the library's [`Access`] and checks each route's scope:
//!
//! | route | scope |
//! |---|---|
//! | `GET /v1/reminders/{id}`, `GET /v1/subscribers/{id}/reminders` | `reminders/read` |
//! | `PUT`, `DELETE /v1/reminders/{id}` | `reminders/write` |
//! | `GET`, `PUT /v1/subscribers/{id}/preferences` | `subscribers/preferences` |
//! | `DELETE /v1/subscribers/{id}` | `subscribers/erase` |
//! | `GET /v1/series/{id}`, `GET /v1/subscribers/{id}/series` | `reminders/read` |
//! | `PUT`, `DELETE /v1/series/{id}` | `reminders/write` |
//!
//! With the JWT authorizer, API Gateway checks the scopes itself (the template's
//! `AuthorizationScopes`); the router checks them again, so `remind local api` and a stack
//! deployed without them answer alike. IAM callers carry no scopes: their policy on the route
//! ARNs decides. Owner isolation (on unless `OWNER_ISOLATION=off`): a caller reaches only the
//! reminders it created. An end user's token (`SUBSCRIBER_CLAIM` names the claim holding their
//! subscriber id) reads its own subscriber's reminders and sets its preferences, nothing else.

use std::collections::{BTreeSet, HashMap};

use axum::http::request::Parts;
use axum::http::StatusCode;
use reminders::config::{ConfigError, Vars};
use reminders::domain::{Access, Owner, SubscriberId};

use crate::error::ApiError;

pub use reminders::wiring::api_auth::{
    OWNER_ISOLATION_VAR, REQUIRE_SCOPES_VAR, SCOPE_PREFIX_VAR, SUBSCRIBER_CLAIM_VAR,
};

/// Development only (`remindctl local api --trust-identity-header`): the caller's identity
/// and its claims (a JSON object of strings; `scope` space-separated), taken as stated.
pub const CALLER_HEADER: &str = "x-reminders-caller";
pub const CLAIMS_HEADER: &str = "x-reminders-claims";

/// A route's scope.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope {
    Read,
    Write,
    Preferences,
    Erase,
}

impl Scope {
    pub const ALL: [Scope; 4] = [Scope::Read, Scope::Write, Scope::Preferences, Scope::Erase];

    pub const fn as_str(self) -> &'static str {
        match self {
            Scope::Read => "reminders/read",
            Scope::Write => "reminders/write",
            Scope::Preferences => "subscribers/preferences",
            Scope::Erase => "subscribers/erase",
        }
    }
}

/// Where the caller's identity comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Identity {
    /// API Gateway's request context (the deployed function). A request that reaches the
    /// function without an authorizer's identity (a route deployed without one, a direct
    /// invoke) is refused `401`: it never becomes an operator.
    Authorizer,
    /// The development headers ([`CALLER_HEADER`], [`CLAIMS_HEADER`]); a request without
    /// them is refused `401`.
    TrustHeaders,
    /// No authorization at all (`remindctl local api` without `--trust-identity-header`,
    /// the router's tests): every request is an operator's and reaches every reminder.
    /// Never the deployed function's: [`Auth::from_env`] always answers [`Identity::Authorizer`].
    Operator,
}

/// The API's authorization settings, from the same variables the template sets.
#[derive(Debug, Clone)]
pub struct Auth {
    pub identity: Identity,
    pub owner_isolation: bool,
    pub require_scopes: bool,
    pub scope_prefix: String,
    pub subscriber_claim: Option<String>,
}

impl Default for Auth {
    fn default() -> Self {
        Self {
            identity: Identity::Authorizer,
            owner_isolation: true,
            require_scopes: true,
            scope_prefix: String::new(),
            subscriber_claim: None,
        }
    }
}

impl Auth {
    pub fn from_env() -> Result<Self, ConfigError> {
        Self::from_vars(&Vars::env())
    }

    pub fn from_vars<F: Fn(&str) -> Option<String>>(vars: &Vars<F>) -> Result<Self, ConfigError> {
        let on_off = |name: &'static str| -> Result<bool, ConfigError> {
            match vars.get(name).as_deref().map(str::trim) {
                None | Some("") | Some("on") | Some("true") => Ok(true),
                Some("off") | Some("false") => Ok(false),
                Some(_) => Err(ConfigError::invalid(name, "must be on or off")),
            }
        };
        let text = |name: &str| vars.get(name).map(|v| v.trim().to_owned());
        Ok(Self {
            identity: Identity::Authorizer,
            owner_isolation: on_off(OWNER_ISOLATION_VAR)?,
            require_scopes: on_off(REQUIRE_SCOPES_VAR)?,
            scope_prefix: text(SCOPE_PREFIX_VAR).unwrap_or_default(),
            subscriber_claim: text(SUBSCRIBER_CLAIM_VAR).filter(|c| !c.is_empty()),
        })
    }

    /// The scope a token must hold for `scope`'s routes (`API_SCOPE_PREFIX` + its name).
    pub fn scope_name(&self, scope: Scope) -> String {
        format!("{}{}", self.scope_prefix, scope.as_str())
    }
}

/// The caller of one request, as its authorizer (or the development headers) stated it.
#[derive(Debug, Clone, Default)]
pub struct Caller {
    /// The JWT's `client_id` (else `sub`), or the IAM principal's ARN; `None` without an
    /// authorizer.
    pub principal: Option<String>,
    /// A JWT's scopes; `None` for IAM callers and requests without an authorizer.
    pub scopes: Option<BTreeSet<String>>,
    pub claims: HashMap<String, String>,
}

impl Caller {
    /// From the request: the development headers when `auth` trusts them, else API
    /// Gateway's request context, if any.
    pub fn of(parts: &Parts, auth: &Auth) -> Result<Self, ApiError> {
        match auth.identity {
            Identity::TrustHeaders => Self::from_headers(parts),
            Identity::Authorizer => Self::from_context(parts)
                .ok_or_else(|| unauthorized("no identity from API Gateway's authorizer")),
            Identity::Operator => Ok(Self::default()),
        }
    }

    fn from_headers(parts: &Parts) -> Result<Self, ApiError> {
        let header = |name: &str| {
            parts
                .headers
                .get(name)
                .map(|v| v.to_str().map(str::to_owned))
        };
        let principal = match header(CALLER_HEADER) {
            Some(Ok(p)) if !p.trim().is_empty() => p.trim().to_owned(),
            _ => return Err(unauthorized(&format!("no {CALLER_HEADER} header"))),
        };
        let claims: HashMap<String, String> = match header(CLAIMS_HEADER) {
            None => HashMap::new(),
            Some(raw) => raw
                .ok()
                .and_then(|r| serde_json::from_str(&r).ok())
                .ok_or_else(|| {
                    unauthorized(&format!(
                        "{CLAIMS_HEADER}: must be a JSON object of strings"
                    ))
                })?,
        };
        let scopes = Some(scopes_claim(&claims));
        Ok(Self {
            principal: Some(principal),
            scopes,
            claims,
        })
    }

    /// The authorizer's caller, or `None` when the request carries no usable identity.
    fn from_context(parts: &Parts) -> Option<Self> {
        use lambda_http::request::RequestContext;
        let Some(RequestContext::ApiGatewayV2(ctx)) = parts.extensions.get::<RequestContext>()
        else {
            return None;
        };
        let authorizer = ctx.authorizer.as_ref()?;
        if let Some(jwt) = &authorizer.jwt {
            let claims = jwt.claims.clone();
            let principal = claims
                .get("client_id")
                .or_else(|| claims.get("sub"))
                .filter(|p| !p.trim().is_empty())
                .cloned()?;
            let scopes = match &jwt.scopes {
                Some(s) if !s.is_empty() => s.iter().cloned().collect(),
                _ => scopes_claim(&claims),
            };
            return Some(Self {
                principal: Some(principal),
                scopes: Some(scopes),
                claims,
            });
        }
        if let Some(iam) = &authorizer.iam {
            let principal = iam
                .user_arn
                .as_deref()
                .map(iam_principal)
                .or_else(|| iam.caller_id.clone())
                .filter(|p| !p.trim().is_empty())?;
            return Some(Self {
                principal: Some(principal),
                scopes: None,
                claims: HashMap::new(),
            });
        }
        None
    }

    /// `403` unless the caller's token holds `scope` (callers without scopes — IAM, whose
    /// policy on the route ARNs decides, or [`Identity::Operator`] — are not checked here).
    pub fn require(&self, auth: &Auth, scope: Scope) -> Result<(), ApiError> {
        let Some(held) = &self.scopes else {
            return Ok(());
        };
        let name = auth.scope_name(scope);
        if !auth.require_scopes || held.contains(&name) {
            return Ok(());
        }
        Err(ApiError {
            status: StatusCode::FORBIDDEN,
            code: "forbidden",
            field: None,
            message: format!("this route needs the scope {name}"),
        })
    }

    /// What the caller reaches: its subscriber (an end user's token), the reminders it owns
    /// (owner isolation), or every reminder.
    pub fn access(&self, auth: &Auth) -> Result<Access, ApiError> {
        if let Some(claim) = &auth.subscriber_claim {
            if let Some(value) = self.claims.get(claim) {
                let s = SubscriberId::parse(value.clone()).map_err(|_| {
                    unauthorized(&format!("the {claim} claim is not a subscriber id"))
                })?;
                return Ok(Access::Subscriber(s));
            }
        }
        match (&self.principal, auth.owner_isolation) {
            (Some(p), true) => Owner::parse(p.clone())
                .map(Access::Owner)
                .map_err(|_| unauthorized("the caller's identity is not usable as an owner")),
            _ => Ok(Access::Any),
        }
    }
}

/// An end user's token may read its reminders and set its preferences; nothing else.
pub fn end_user_refused() -> ApiError {
    ApiError {
        status: StatusCode::FORBIDDEN,
        code: "forbidden",
        field: None,
        message: "an end user's token reads its own reminders and sets its own preferences \
                  only"
            .to_owned(),
    }
}

/// The owner an IAM caller is stored as: an assumed role's ARN without its session name
/// (`arn:aws:sts::123456789012:assumed-role/app/i-0abc` is `…:assumed-role/app`), so that every
/// session of one role — each Lambda instance, each `aws sts assume-role` — is one owner. A
/// user's or any other ARN is kept as it is.
pub fn iam_principal(arn: &str) -> String {
    let mut parts = arn.splitn(6, ':');
    let (Some("arn"), Some(_partition), Some("sts"), Some(_region), Some(_account), Some(res)) = (
        parts.next(),
        parts.next(),
        parts.next(),
        parts.next(),
        parts.next(),
        parts.next(),
    ) else {
        return arn.to_owned();
    };
    match res
        .strip_prefix("assumed-role/")
        .and_then(|r| r.split_once('/'))
    {
        Some((role, _session)) if !role.is_empty() => {
            arn[..arn.len() - res.len()].to_owned() + "assumed-role/" + role
        }
        _ => arn.to_owned(),
    }
}

fn scopes_claim(claims: &HashMap<String, String>) -> BTreeSet<String> {
    claims
        .get("scope")
        .map(|s| s.split_whitespace().map(str::to_owned).collect())
        .unwrap_or_default()
}

fn unauthorized(why: &str) -> ApiError {
    ApiError {
        status: StatusCode::UNAUTHORIZED,
        code: "unauthorized",
        field: None,
        message: why.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::iam_principal;

    #[test]
    fn every_session_of_one_role_is_one_owner() {
        let a = "arn:aws:sts::123456789012:assumed-role/app/i-0abc";
        let b = "arn:aws:sts::123456789012:assumed-role/app/botocore-session-17";
        assert_eq!(
            iam_principal(a),
            "arn:aws:sts::123456789012:assumed-role/app"
        );
        assert_eq!(iam_principal(a), iam_principal(b));
        assert_ne!(
            iam_principal(a),
            iam_principal("arn:aws:sts::123456789012:assumed-role/other/i-0abc")
        );
        assert_eq!(
            iam_principal("arn:aws-cn:sts::123456789012:assumed-role/app/s"),
            "arn:aws-cn:sts::123456789012:assumed-role/app"
        );
        for kept in [
            "arn:aws:iam::123456789012:user/alice",
            "arn:aws:iam::123456789012:role/app",
            "arn:aws:sts::123456789012:federated-user/bob",
            "arn:aws:sts::123456789012:assumed-role/app",
            "AIDAEXAMPLE",
        ] {
            assert_eq!(iam_principal(kept), kept);
        }
    }
}
