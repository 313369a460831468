// Copyright 2026 The authors.
// SPDX-License-Identifier: Apache-2.0

//! The webhooks of FlightTicket (flights.com/v1), registered by [`setup`]:
//! - defaulting: [`FlightTicketCustomDefaulter`] books economy unless told otherwise;
//! - validation: [`FlightTicketCustomValidator`] refuses a flight to where it departs and an
//!   unknown class, with kube's field errors;
//! - conversion: v1 is the hub; v2 (`departure`/`arrival`/`seats`) converts to and from it.

use opkit::Manager;
use opkit::webhook::{
    AdmissionContext, AdmissionError, Convertible, CustomDefaulter, CustomValidator, FieldError, Hub, WebhookServer,
};

use crate::api::flights_v1::{FlightTicket, FlightTicketSpec};
use crate::api::flights_v2;

/// The cabin classes a ticket may book; the first is the default.
pub const CLASSES: [&str; 3] = ["economy", "business", "first"];

/// Registers the webhooks of FlightTicket on `server`.
pub fn setup(mgr: &Manager, server: WebhookServer) -> WebhookServer {
    mgr.webhook_for::<FlightTicket>()
        .with_defaulter(FlightTicketCustomDefaulter)
        .with_validator(FlightTicketCustomValidator)
        .with_spoke::<flights_v2::FlightTicket>()
        .complete(server)
}

// +kubebuilder:webhook:path=/mutate-flights-com-v1-flightticket,mutating=true,failurePolicy=fail,sideEffects=None,groups=flights.com,resources=flighttickets,verbs=create;update,versions=v1,name=mflightticket-v1.kb.io,admissionReviewVersions=v1

/// Sets the defaults of a FlightTicket when it is created or updated: `spec.class` economy.
#[derive(Debug, Default, Clone, Copy)]
pub struct FlightTicketCustomDefaulter;

impl CustomDefaulter<FlightTicket> for FlightTicketCustomDefaulter {
    async fn default(
        &self,
        _ctx: &AdmissionContext<'_, FlightTicket>,
        obj: &mut FlightTicket,
    ) -> Result<(), AdmissionError> {
        obj.spec.class.get_or_insert_with(|| CLASSES[0].to_owned());
        Ok(())
    }
}

// +kubebuilder:webhook:path=/validate-flights-com-v1-flightticket,mutating=false,failurePolicy=fail,sideEffects=None,groups=flights.com,resources=flighttickets,verbs=create;update,versions=v1,name=vflightticket-v1.kb.io,admissionReviewVersions=v1

/// Validates a FlightTicket when it is created or updated: a denial reads
/// `admission webhook "vflightticket-v1.kb.io" denied the request: FlightTicket.flights.com
/// "t" is invalid: spec.to: Invalid value: "Mumbai": must differ from spec.from`.
#[derive(Debug, Default, Clone, Copy)]
pub struct FlightTicketCustomValidator;

impl FlightTicketCustomValidator {
    /// What is wrong with `spec`, per field.
    pub fn field_errors(spec: &FlightTicketSpec) -> Vec<FieldError> {
        let mut errors = Vec::new();
        if spec.from == spec.to {
            errors.push(FieldError::invalid("spec.to", spec.to.as_str(), "must differ from spec.from"));
        }
        if let Some(class) = spec.class.as_deref().filter(|c| !CLASSES.contains(c)) {
            errors.push(FieldError::invalid("spec.class", class, format!("must be one of {}", CLASSES.join(", "))));
        }
        errors
    }

    fn validate(obj: &FlightTicket) -> Result<Vec<String>, AdmissionError> {
        let errors = Self::field_errors(&obj.spec);
        if !errors.is_empty() {
            return Err(AdmissionError::invalid(obj, errors));
        }
        let warnings = match obj.spec.class.as_deref() {
            Some("first") if obj.spec.number > 4 => {
                vec![format!("{} first-class seats on one ticket may not be available", obj.spec.number)]
            }
            _ => Vec::new(),
        };
        Ok(warnings)
    }
}

impl CustomValidator<FlightTicket> for FlightTicketCustomValidator {
    async fn validate_create(
        &self,
        _ctx: &AdmissionContext<'_, FlightTicket>,
        obj: &FlightTicket,
    ) -> Result<Vec<String>, AdmissionError> {
        Self::validate(obj)
    }

    async fn validate_update(
        &self,
        _ctx: &AdmissionContext<'_, FlightTicket>,
        _old: &FlightTicket,
        new: &FlightTicket,
    ) -> Result<Vec<String>, AdmissionError> {
        Self::validate(new)
    }
}

/// v1 is the version every other version of FlightTicket converts through (and the one stored).
impl Hub for FlightTicket {}

impl Convertible<FlightTicket> for flights_v2::FlightTicket {
    fn convert_to(&self) -> FlightTicket {
        let spec = FlightTicketSpec {
            from: self.spec.departure.clone(),
            to: self.spec.arrival.clone(),
            number: self.spec.seats,
            class: self.spec.class.clone(),
        };
        FlightTicket { metadata: self.metadata.clone(), spec, status: self.status.clone() }
    }

    fn convert_from(hub: &FlightTicket) -> Self {
        let spec = flights_v2::FlightTicketSpec {
            departure: hub.spec.from.clone(),
            arrival: hub.spec.to.clone(),
            seats: hub.spec.number,
            class: hub.spec.class.clone(),
        };
        flights_v2::FlightTicket { metadata: hub.metadata.clone(), spec, status: hub.status.clone() }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ticket(from: &str, to: &str, number: i32, class: Option<&str>) -> FlightTicket {
        let spec = FlightTicketSpec { from: from.into(), to: to.into(), number, class: class.map(Into::into) };
        FlightTicket::new("t", spec)
    }

    /// The context of a CREATE of `obj` by `alice`, as the API server sends it.
    fn create_context(obj: &FlightTicket) -> (opkit::webhook::AdmissionRequest<FlightTicket>, kube::Client) {
        let review = serde_json::json!({
            "apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
            "request": {
                "uid": "1", "operation": "CREATE", "userInfo": {"username": "alice"}, "object": obj,
                "kind": {"group": "flights.com", "version": "v1", "kind": "FlightTicket"},
                "resource": {"group": "flights.com", "version": "v1", "resource": "flighttickets"},
            }
        });
        let review: kube::core::admission::AdmissionReview<FlightTicket> =
            serde_json::from_value(review).expect("review");
        // A client of a server the tests never call.
        let config = kube::Config::new("https://127.0.0.1:1".parse().expect("url"));
        (review.try_into().expect("request"), kube::Client::try_from(config).expect("client"))
    }

    #[tokio::test]
    async fn economy_is_the_default_class() {
        let mut obj = ticket("Mumbai", "London", 2, None);
        let (request, client) = create_context(&obj);
        let ctx = AdmissionContext { request: &request, client: &client };
        FlightTicketCustomDefaulter.default(&ctx, &mut obj).await.expect("defaulted");
        assert_eq!(obj.spec.class.as_deref(), Some("economy"));
        let mut first = ticket("Mumbai", "London", 2, Some("first"));
        FlightTicketCustomDefaulter.default(&ctx, &mut first).await.expect("defaulted");
        assert_eq!(first.spec.class.as_deref(), Some("first"), "a chosen class is kept");
    }

    #[tokio::test]
    async fn a_flight_must_go_somewhere_else() {
        let ok = ticket("Mumbai", "London", 2, Some("economy"));
        let (request, client) = create_context(&ok);
        let ctx = AdmissionContext { request: &request, client: &client };
        assert_eq!(FlightTicketCustomValidator.validate_create(&ctx, &ok).await, Ok(Vec::new()));
        let same = ticket("Mumbai", "Mumbai", 2, None);
        let denied = FlightTicketCustomValidator.validate_update(&ctx, &ok, &same).await.expect_err("denied");
        assert_eq!(
            denied.to_string(),
            r#"FlightTicket.flights.com "t" is invalid: spec.to: Invalid value: "Mumbai": must differ from spec.from"#
        );
        let status = denied.status();
        assert_eq!((status.code, status.reason.as_str()), (422, "Invalid"));
        let causes = status.details.map(|d| d.causes).unwrap_or_default();
        assert_eq!(causes.len(), 1);
        assert_eq!((causes[0].field.as_str(), causes[0].reason.as_str()), ("spec.to", "FieldValueInvalid"));
    }

    #[tokio::test]
    async fn unknown_classes_are_refused_and_big_first_class_bookings_warned() {
        let both = ticket("Oslo", "Oslo", 2, Some("deluxe"));
        let (request, client) = create_context(&both);
        let ctx = AdmissionContext { request: &request, client: &client };
        let denied = FlightTicketCustomValidator.validate_create(&ctx, &both).await.expect_err("denied");
        assert_eq!(
            denied.to_string(),
            r#"FlightTicket.flights.com "t" is invalid: [spec.to: Invalid value: "Oslo": must differ from spec.from, spec.class: Invalid value: "deluxe": must be one of economy, business, first]"#
        );
        let big = ticket("Oslo", "Rome", 6, Some("first"));
        let warnings = FlightTicketCustomValidator.validate_create(&ctx, &big).await.expect("admitted");
        assert_eq!(warnings, ["6 first-class seats on one ticket may not be available"]);
    }

    #[test]
    fn v2_round_trips_through_the_hub() {
        let mut hub = ticket("Mumbai", "London", 3, Some("business"));
        hub.metadata.namespace = Some("default".into());
        let v2 = flights_v2::FlightTicket::convert_from(&hub);
        assert_eq!(v2.metadata, hub.metadata);
        assert_eq!(
            v2.spec,
            flights_v2::FlightTicketSpec {
                departure: "Mumbai".into(),
                arrival: "London".into(),
                seats: 3,
                class: Some("business".into())
            }
        );
        assert_eq!(v2.convert_to(), hub);
    }
}
