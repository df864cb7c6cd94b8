// Package coalesce is the pure core of RFC-006, event coalescing: it
// decides what every coalesced occurrence does to its subject, and the
// caller does the rest. It has no goroutines, no clock (time comes in as
// an argument), no I/O; every call is a deterministic step on a Table,
// and the effects it returns are for the caller to apply, in order.
//
// # What the core decides
//
//   - Validation of a coalesce member (Parse, RFC-006 §13), and the
//     subject it addresses (SubjectFor, §3.2).
//   - Admission (Table.Plan, Table.Commit, Table.Admit): the outcome and
//     priorEventId of §4, §5.1 and §6, which earlier occurrences leave
//     delivery (Result.Removed, with why, for the audit of §11 and the
//     wake bookkeeping of §4.2), and whether this one is delivered as
//     ordinary content, held as a deferred batch's placeholder, or not at
//     all (Result.Deliver).
//   - Retry receipts (§3.1): a retry of (binding, eventId) within the
//     window advertised when it was first admitted gets the original
//     result and has no effect.
//   - Consumption (Table.Consume, §3.3): the consumed-history tri-state
//     none/some/unknown, which only ever moves away from none.
//   - The deferred state machine (§5.2–§5.4): StartRender freezes a batch
//     and returns the push/render params; Finish decides, exactly once per
//     batch, whether the result, nothing, or the fallback materializes,
//     and discards a completion of a cancelled or already closed batch.
//     Fallback and Lapse close a pending batch without a render.
//   - Capacity and eviction (§11), and restart (Export, Import, Recover).
//
// # What the caller does
//
// The caller runs every admission check an ordinary occurrence faces
// (enablement, grant, channel registration and authority, content
// validation) before the table sees it: a refused occurrence touches no
// subject. It keeps the content: occurrences are known here by their
// eventId within their binding, and the caller removes, holds, delivers
// and materializes the rows that carry them. It decides wakes (§4.2),
// given Result.Removed to drop a wake whose only cause was removed, and
// it narrows a replacement's audience to the contexts of what it replaced
// (Result.Narrow, §3.2). It sends push/render with its timeout and checks
// the result as pushed content before Finish. It calls Consume with the
// eventIds each request assembles, Export to make the table durable, and
// Import plus Recover after a restart.
//
// # Profile
//
// Where RFC-006 leaves a host the choice, this core chooses:
//
//   - Conservative shared consumption (§3.3): an occurrence consumed in
//     any context is consumed in all. Outcomes are then the same for
//     every context, and one render serves every recipient (§5.2, vector
//     25); per-context replacement (vector 46) does not apply.
//   - initial establishes none (§3.3): an initial occurrence of a subject
//     the table is not tracking starts it at none; without initial an
//     untracked subject is unknown, and initial never lowers some or
//     unknown.
//   - Conservative recovery (§3.2, vector 7): after a restart every
//     unconsumed occupant is sealed as ordinary and every batch falls back
//     (RecoverConservative); RecoverPreserving is there for a caller that
//     keeps them replaceable.
//   - 64 notices retained per batch, the newest, the rest counted as
//     dropped (§5.1; Options.MaxNotices may raise it).
//   - Capacity degrades, never refuses (§11): a binding tracks at most
//     Options.MaxSubjects subjects; at the bound a new subject takes the
//     place of the longest-idle one (nothing unconsumed, so only its
//     history is lost, to unknown), or, none being idle, is admitted as a
//     host without coalescing would: "appended" (a notice then delivers
//     its fallback, unrendered), "noted" or "consumed" for a retraction.
//   - A retraction of an untracked subject does not start tracking it:
//     untracked is unknown already.
//   - A materialized batch still unread is not displaced by a later notice
//     (it is the next render's baseline, vector 49) and is sealed as
//     ordinary, treated as consumed, when the next batch of its subject
//     materializes; a plain occurrence or a retraction still removes it.
//   - One render open per subject at a time (StartRender).
package coalesce
