package server

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"slices"

	"github.com/mcpl-go/mcpl/grant"
	"github.com/mcpl-go/mcpl/internal/wire"
	"github.com/mcpl-go/mcpl/protocol"
)

// Policy is the capability grant a host sent in featureSets/update (SPEC
// §5.3, §6.7), as this server applies it. It is a value: a later policy
// replaces it whole.
type Policy struct {
	// Effective is the sole allowlist: a path not in it is denied.
	Effective []string
	// Denied is the host's diagnostic list; it takes no part in any
	// decision.
	Denied []string
	// Enabled is the host's feature-set allowlist as sent; nil when the
	// host sent none, which constrains nothing.
	Enabled []string
	// Disabled lists the feature sets the host disabled, with those a
	// narrowing notification added since.
	Disabled []string

	sets map[string]bool // each declared feature set: enabled?
}

// Has reports whether path is granted. It is an exact lookup: a parent
// path grants only itself, and a wildcard in Effective grants nothing
// (SPEC §5.4 puts the wildcards in host policy, not on the wire).
func (p Policy) Has(path string) bool { return slices.Contains(p.Effective, path) }

// FeatureSetEnabled reports whether the declared feature set name is
// enabled: every path its uses names is granted, the host's Enabled list
// (when sent) selects it, and no Disabled entry names it. Names in Enabled
// and Disabled may be patterns: "*", or "prefix.*" for every set under
// prefix (SPEC §6.3). An undeclared name is never enabled.
func (p Policy) FeatureSetEnabled(name string) bool { return p.sets[name] }

// newPolicy applies a policy Request to the declared feature sets. Absent
// effectiveCapabilities grants nothing; absent enabled constrains nothing;
// disabled always subtracts (SPEC §5.3).
func newPolicy(m protocol.FeatureSetsUpdateParams, declared []FeatureSet) Policy {
	p := Policy{
		Effective: orEmpty(m.EffectiveCapabilities),
		Denied:    orEmpty(m.DeniedCapabilities),
		Enabled:   slices.Clone(m.Enabled),
		Disabled:  orEmpty(m.Disabled),
		sets:      make(map[string]bool, len(declared)),
	}
	for _, fs := range declared {
		on := true
		for _, u := range fs.Uses {
			on = on && p.Has(u)
		}
		if p.Enabled != nil && !grant.MatchFeatureSet(p.Enabled, fs.Name) {
			on = false
		}
		if grant.MatchFeatureSet(p.Disabled, fs.Name) {
			on = false
		}
		p.sets[fs.Name] = on
	}
	return p
}

// narrow returns p with the feature sets names match disabled, and names
// added to Disabled: the only part of a Notification a server applies.
func (p Policy) narrow(names []string) Policy {
	q := p
	q.Disabled = append(slices.Clone(p.Disabled), names...)
	q.sets = make(map[string]bool, len(p.sets))
	for name, on := range p.sets {
		q.sets[name] = on && !grant.MatchFeatureSet(names, name)
	}
	return q
}

// meet is what a and b both grant: the policy in force while a new one
// is being acknowledged, so that a reduction applies at once and an
// expansion only after the receipt is written (SPEC §6.7).
func meet(a, b Policy) Policy {
	q := b
	q.Effective = []string{}
	for _, path := range b.Effective {
		if a.Has(path) {
			q.Effective = append(q.Effective, path)
		}
	}
	q.sets = make(map[string]bool, len(b.sets))
	for name, on := range b.sets {
		q.sets[name] = on && a.sets[name]
	}
	return q
}

func orEmpty(s []string) []string {
	if s == nil {
		return []string{}
	}
	return slices.Clone(s)
}

// receipt is the degradation receipt for p (SPEC §6.7): accepted, and
// degraded when a declared feature set's uses is not covered by the grant,
// each such set listed with what it misses and effect "disabled". When
// nothing degraded, mode is omitted.
func receipt(p Policy, declared []FeatureSet) protocol.PolicyReceipt {
	r := protocol.PolicyReceipt{Accepted: true}
	for _, fs := range declared {
		var missing []string
		for _, u := range fs.Uses {
			if !p.Has(u) {
				missing = append(missing, u)
			}
		}
		if len(missing) > 0 {
			r.UnavailableFeatures = append(r.UnavailableFeatures, protocol.UnavailableFeature{
				FeatureSet: fs.Name, MissingCapabilities: missing, Effect: EffectDisabled,
			})
		}
	}
	if len(r.UnavailableFeatures) > 0 {
		r.Mode = ModeDegraded
	}
	return r
}

// Receipt vocabulary.
const (
	// ModeDegraded is a receipt's mode when a feature set is unavailable.
	ModeDegraded = "degraded"
	// EffectDisabled is the effect of an unavailable feature set that
	// will not run at all.
	EffectDisabled = "disabled"
)

// Refusal is an error CheckPolicy returns to refuse a policy (SPEC §6.7).
// The receipt then says accepted false, with Fallback, the capabilities
// the server says it misses, and Reason. A refusal is testimony: the host
// must not widen its grant because of it.
type Refusal struct {
	// Fallback is protocol.FallbackMCPOnly (MCPL off, tools still work;
	// the default when empty) or protocol.FallbackClose (the server ends
	// the connection once the receipt is written).
	Fallback            string
	MissingCapabilities []string
	Reason              string
}

func (r *Refusal) Error() string {
	return "server: policy refused (fallback " + r.fallback() + "): " + r.Reason
}

func (r *Refusal) fallback() string {
	if r.Fallback == protocol.FallbackClose {
		return protocol.FallbackClose
	}
	return protocol.FallbackMCPOnly
}

// refusalReceipt turns CheckPolicy's error into a refusal receipt. The
// fallback is always one the spec defines: REQUIRED when accepted is false.
func (c *Conn) refusalReceipt(err error) protocol.PolicyReceipt {
	var r *Refusal
	if !errors.As(err, &r) {
		r = &Refusal{Reason: err.Error()}
	}
	if r.Fallback != "" && r.Fallback != protocol.FallbackMCPOnly && r.Fallback != protocol.FallbackClose {
		c.log.Warn("refusal names a fallback the spec does not define; sending mcp-only", slog.String("fallback", r.Fallback))
	}
	return protocol.PolicyReceipt{
		Accepted:            false,
		Fallback:            r.fallback(),
		MissingCapabilities: r.MissingCapabilities,
		Reason:              r.Reason,
	}
}

// featureSetsUpdate handles featureSets/update. A Request is the policy:
// it is checked (a path both granted and denied makes it malformed: -32602,
// and the policy in force stands), its receipt computed and offered to
// CheckPolicy, and the receipt written; a reduction is applied before the
// receipt is written, an expansion after. A Notification only narrows: its
// disabled list is applied, everything else ignored with a log line, and it
// never establishes the policy.
func (c *Conn) featureSetsUpdate(ctx context.Context, req *wire.Request) (any, error) {
	var m protocol.FeatureSetsUpdateParams
	if len(req.Params) > 0 && string(req.Params) != "null" {
		if err := json.Unmarshal(req.Params, &m); err != nil {
			return c.badPolicy(req, "Invalid params: featureSets/update params are not an object of capability and feature-set lists")
		}
	}
	if err := grant.CheckPolicyMessage(m.EffectiveCapabilities, m.DeniedCapabilities); err != nil {
		return c.badPolicy(req, "Invalid params: "+err.Error()+"; the policy is rejected whole (SPEC §5.4)")
	}
	if req.IsNotification() {
		c.narrowBy(m)
		return nil, nil
	}

	declared := c.s.opts.FeatureSets
	next := newPolicy(m, declared)
	rec := receipt(next, declared)
	if check := c.s.opts.CheckPolicy; check != nil {
		if err := check(ctx, next, &rec); err != nil {
			rec = c.refusalReceipt(err)
		}
	}
	if !rec.Accepted {
		// MCPL is off: nothing is granted, before the receipt as after.
		c.setPolicy(nil, stateRefused)
		req.Defer()(rec, nil)
		c.log.Warn("refused the host's policy", slog.String("fallback", rec.Fallback), slog.String("reason", rec.Reason))
		if rec.Fallback == protocol.FallbackClose {
			c.refuseClose()
		}
		return nil, nil
	}
	prev, _ := c.currentPolicy()
	interim := meet(prev, next)
	c.setPolicy(&interim, c.policyState())
	req.Defer()(rec, nil)
	c.setPolicy(&next, stateEstablished)
	c.log.Debug("policy established", slog.Any("effective", next.Effective), slog.Bool("degraded", rec.Mode != ""))
	return nil, nil
}

// badPolicy rejects a malformed policy Request with -32602, or logs and
// drops a malformed Notification. The policy in force stands.
func (c *Conn) badPolicy(req *wire.Request, msg string) (any, error) {
	if req.IsNotification() {
		c.log.Warn("malformed featureSets/update notification ignored", slog.String("reason", msg))
		return nil, nil
	}
	c.log.Warn("malformed policy rejected", slog.String("reason", msg))
	return nil, &protocol.Error{Code: protocol.CodeInvalidParams, Message: msg}
}

// narrowBy applies a featureSets/update Notification (SPEC §6.7): its
// disabled list narrows the policy in force; grant fields and any widening
// are discarded, with a diagnostic.
func (c *Conn) narrowBy(m protocol.FeatureSetsUpdateParams) {
	if m.EffectiveCapabilities != nil || m.Enabled != nil {
		c.log.Info("featureSets/update notification carries grant fields; ignored (only a Request changes the grant, SPEC §6.7)")
	}
	if len(m.Disabled) == 0 {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.policy == nil {
		c.log.Info("featureSets/update notification before any policy: nothing is enabled to narrow", slog.Any("disabled", m.Disabled))
		return
	}
	narrowed := c.policy.narrow(m.Disabled)
	c.policy = &narrowed
	c.log.Info("feature sets narrowed by notification", slog.Any("disabled", m.Disabled))
}
