// Copyright 2026 The authors.
// SPDX-License-Identifier: Apache-2.0

//! The FlightTicket controller: reconciles FlightTicket objects (flights.com/v1) by "booking"
//! them: it reports the phase `Booked` (or `Rejected` when the flight departs where it
//! arrives), `booked`, `observedGeneration` and a `Ready` condition through the status
//! subresource.

use opkit::status::{new_condition, set_condition, update_status_from};
use opkit::{Action, BuildError, Context, Controller, Manager, ReconcileResult};

use crate::api::flights_v1::{CONDITION_READY, FlightTicket, FlightTicketPhase, FlightTicketStatus};

// The RBAC rules this controller needs: `opkit generate` (make manifests) turns these
// markers into config/rbac/role.yaml. Add one for every kind the reconciler reads or writes.
// +kubebuilder:rbac:groups=flights.com,resources=flighttickets,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=flights.com,resources=flighttickets/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=flights.com,resources=flighttickets/finalizers,verbs=update

/// The `Ready` condition's reason when the seats are booked.
pub const REASON_BOOKED: &str = "Booked";
/// The `Ready` condition's reason when the ticket departs where it arrives.
pub const REASON_SAME_AIRPORT: &str = "SameOriginAndDestination";

/// Moves the cluster toward the state a FlightTicket declares. It runs on every change of the
/// FlightTicket, so it is idempotent: when the status already says what [`book`] computes,
/// nothing is written.
///
/// How to return, as in controller-runtime:
/// - `Err(e)`, or `?` on a failed call: the request is retried with exponential backoff;
/// - `Ok(Action::requeue())`: not finished; run again (with backoff) without an error;
/// - `Ok(Action::done())`: the desired state is reached; wait for the next change;
/// - `Ok(Action::requeue_after(d))`: check again after `d`, e.g. to poll an outside system.
pub async fn reconcile(ctx: Context<FlightTicket>) -> ReconcileResult {
    // The object comes from the manager's cache. None: it was deleted (children are
    // garbage-collected through their owner references, so there is nothing to do).
    let Some(obj) = ctx.object.as_ref() else {
        return Ok(Action::done());
    };
    tracing::info!(request = %ctx.request, generation = ?obj.metadata.generation, "reconciling FlightTicket");
    // The cached object may be stale: update_status_from re-reads it and applies `book`
    // again after a 409 Conflict, and skips the write when nothing changes.
    let stored = update_status_from(&ctx.api(), FlightTicket::clone(obj), |ticket| {
        let mut status = ticket.status.take().unwrap_or_default();
        book(ticket, &mut status);
        ticket.status = Some(status);
    })
    .await?;
    let phase = stored.status.as_ref().and_then(|s| s.phase).unwrap_or_default();
    tracing::info!(request = %ctx.request, %phase, "FlightTicket reconciled");
    Ok(Action::done())
}

/// Writes into `status` what the controller reports for `ticket`: phase `Booked` (booked,
/// `Ready=True`) or, when `from` and `to` name the same place, `Rejected` (not booked,
/// `Ready=False`), both for the ticket's current generation. Returns whether `status` changed.
pub fn book(ticket: &FlightTicket, status: &mut FlightTicketStatus) -> bool {
    let generation = ticket.metadata.generation;
    let spec = &ticket.spec;
    let same_airport = spec.from.trim().eq_ignore_ascii_case(spec.to.trim());
    let (phase, reason, message) = if same_airport {
        (
            FlightTicketPhase::Rejected,
            REASON_SAME_AIRPORT,
            format!("the flight departs where it arrives ({})", spec.from),
        )
    } else {
        let seats = if spec.number == 1 { "seat" } else { "seats" };
        (
            FlightTicketPhase::Booked,
            REASON_BOOKED,
            format!("booked {} {seats} from {} to {}", spec.number, spec.from, spec.to),
        )
    };
    let before = status.clone();
    status.phase = Some(phase);
    status.booked = phase == FlightTicketPhase::Booked;
    status.observed_generation = generation;
    set_condition(&mut status.conditions, new_condition(CONDITION_READY, !same_airport, reason, &message, generation));
    *status != before
}

/// Registers the controller: it reconciles FlightTicket (`For`). Chain `.owns::<Child>()` for
/// objects it creates and `.watches::<Other>(map)` for others it depends on.
pub fn setup(mgr: &Manager) -> Result<(), BuildError> {
    Controller::new(mgr, reconcile).build()
}

#[cfg(test)]
mod tests {
    use opkit::status::{find_condition, is_condition_false, is_condition_true};

    use super::*;
    use crate::api::flights_v1::FlightTicketSpec;

    fn ticket(from: &str, to: &str, number: i32, generation: i64) -> FlightTicket {
        let mut t = FlightTicket::new("t", FlightTicketSpec { from: from.into(), to: to.into(), number, class: None });
        t.metadata.generation = Some(generation);
        t
    }

    #[test]
    fn books_a_valid_ticket_once() {
        let mut status = FlightTicketStatus::default();
        assert!(book(&ticket("Mumbai", "London", 2, 1), &mut status));
        assert_eq!(status.phase, Some(FlightTicketPhase::Booked));
        assert!(status.booked);
        assert_eq!(status.observed_generation, Some(1));
        assert!(is_condition_true(&status.conditions, CONDITION_READY));
        let ready = find_condition(&status.conditions, CONDITION_READY);
        assert_eq!(
            ready.map(|c| (c.reason.as_str(), c.message.as_str(), c.observed_generation)),
            Some((REASON_BOOKED, "booked 2 seats from Mumbai to London", Some(1)))
        );
        // Idempotent: the same ticket changes nothing.
        assert!(!book(&ticket("Mumbai", "London", 2, 1), &mut status));
        // A new generation is reported.
        assert!(book(&ticket("Mumbai", "London", 1, 2), &mut status));
        assert_eq!(status.observed_generation, Some(2));
        assert_eq!(status.conditions.len(), 1);
        assert_eq!(status.conditions[0].message, "booked 1 seat from Mumbai to London");
    }

    #[test]
    fn rejects_a_round_trip_to_nowhere() {
        let mut status = FlightTicketStatus::default();
        assert!(book(&ticket("Seoul", " seoul", 1, 4), &mut status));
        assert_eq!(status.phase, Some(FlightTicketPhase::Rejected));
        assert!(!status.booked);
        assert!(is_condition_false(&status.conditions, CONDITION_READY));
        assert_eq!(status.conditions[0].reason, REASON_SAME_AIRPORT);
    }
}
