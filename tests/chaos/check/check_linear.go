package check

import (
	"fmt"
	"math"
	"sort"
	"strings"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/lockservice/lockd/api"
)

// regState is one config key's state in the model: absent, or a value at a
// version (1 at create, +1 per put).
type regState struct {
	exists  bool
	value   string
	version uint64
	// unknown: a restore reset the key to its backup's state, which the
	// history does not say; the next definite answer fixes it (ConfigEra).
	unknown bool
}

// configModel is the sequential specification of a config key under get,
// unconditional put and compare-and-set on the version. An operation whose
// outcome is unknown may or may not have taken effect (nondeterministic
// step); one that definitely failed changed nothing.
var configModel = porcupine.NondeterministicModel{
	Partition: func(history []porcupine.Operation) [][]porcupine.Operation {
		byKey := map[string][]porcupine.Operation{}
		var keys []string
		for _, op := range history {
			k := op.Input.(ConfigOp).Key
			if _, ok := byKey[k]; !ok {
				keys = append(keys, k)
			}
			byKey[k] = append(byKey[k], op)
		}
		sort.Strings(keys)
		out := make([][]porcupine.Operation, 0, len(keys))
		for _, k := range keys {
			out = append(out, byKey[k])
		}
		return out
	},
	Init: func() []interface{} { return []interface{}{regState{}} },
	Step: func(state, input, output interface{}) []interface{} {
		st := state.(regState)
		in := input.(ConfigOp)
		out := output.(ConfigOp)
		if in.Kind == ConfigEra {
			return []interface{}{regState{unknown: true}}
		}
		if st.unknown {
			return stepUnknown(st, in, out)
		}
		applied := func() regState {
			return regState{exists: true, value: in.Value, version: st.version + 1}
		}
		switch in.Kind {
		case ConfigGet:
			if out.Outcome != OutcomeOK {
				return []interface{}{st}
			}
			if out.Exists != st.exists || (st.exists && (out.GotValue != st.value || out.Version != st.version)) {
				return nil
			}
			return []interface{}{st}
		case ConfigPut:
			switch out.Outcome {
			case OutcomeOK:
				n := applied()
				if out.Version != n.version {
					return nil
				}
				return []interface{}{n}
			case OutcomeFail:
				return []interface{}{st}
			default:
				return []interface{}{st, applied()}
			}
		case ConfigCAS:
			// Version 0 means "must not exist yet" (a create).
			match := (in.Expect == 0 && !st.exists) || (st.exists && st.version == in.Expect)
			switch out.Outcome {
			case OutcomeOK:
				if !match || out.Version != in.Expect+1 {
					return nil
				}
				return []interface{}{applied()}
			case OutcomeFail:
				// Only a version refusal says the version differed; any
				// other definite failure (wrong_cell, …) applied nothing
				// and says nothing of the version.
				if match && (out.Err == string(api.CodeVersionMismatch) || out.Err == string(api.CodeNodeExists)) {
					return nil
				}
				return []interface{}{st}
			default:
				if match {
					return []interface{}{st, applied()}
				}
				return []interface{}{st}
			}
		}
		return nil
	},
	Equal: func(a, b interface{}) bool { return a.(regState) == b.(regState) },
	DescribeOperation: func(input, output interface{}) string {
		in, out := input.(ConfigOp), output.(ConfigOp)
		return describeConfigOp(in, out)
	},
	DescribeState: func(state interface{}) string {
		st := state.(regState)
		if st.unknown {
			return "unknown (restored)"
		}
		if !st.exists {
			return "absent"
		}
		return fmt.Sprintf("%q@v%d", st.value, st.version)
	},
}

// stepUnknown is the model's step from a restored key's unknown state: a
// definite answer fixes the state; anything else leaves it unknown.
func stepUnknown(st regState, in, out ConfigOp) []interface{} {
	if out.Outcome != OutcomeOK {
		return []interface{}{st}
	}
	switch in.Kind {
	case ConfigGet:
		if !out.Exists {
			return []interface{}{regState{}}
		}
		return []interface{}{regState{exists: true, value: out.GotValue, version: out.Version}}
	case ConfigCAS:
		if out.Version != in.Expect+1 {
			return nil
		}
	}
	return []interface{}{regState{exists: true, value: in.Value, version: out.Version}}
}

func describeConfigOp(in, out ConfigOp) string {
	res := map[Outcome]string{OutcomeOK: "ok", OutcomeFail: "fail", OutcomeUnknown: "unknown"}[out.Outcome]
	if out.Err != "" {
		res += " (" + out.Err + ")"
	}
	switch in.Kind {
	case ConfigEra:
		return fmt.Sprintf("restore of %s: its state is now the backup's", in.Key)
	case ConfigGet:
		if out.Outcome == OutcomeOK && !out.Exists {
			return fmt.Sprintf("get(%s) → absent", in.Key)
		}
		if out.Outcome == OutcomeOK {
			return fmt.Sprintf("get(%s) → %q@v%d", in.Key, out.GotValue, out.Version)
		}
		return fmt.Sprintf("get(%s) → %s", in.Key, res)
	case ConfigPut:
		return fmt.Sprintf("put(%s, %q) → %s v%d", in.Key, in.Value, res, out.Version)
	default:
		return fmt.Sprintf("cas(%s, v%d, %q) → %s v%d", in.Key, in.Expect, in.Value, res, out.Version)
	}
}

// LinearizabilityResult is checker (c)'s verdict.
type LinearizabilityResult struct {
	Ops        int
	Result     porcupine.CheckResult
	Violations []Violation
}

// CheckLinearizable is checker (c): the config gets, puts and
// compare-and-sets form a linearizable history of one register per key
// (porcupine). Operations with an unknown outcome stay open to the end of
// the history and may or may not have taken effect. An Unknown result
// (porcupine ran out of time) fails too: a history nobody could check is
// not shown linearizable.
func CheckLinearizable(ops []ConfigOp, timeout time.Duration) LinearizabilityResult {
	hist := make([]porcupine.Operation, 0, len(ops))
	for _, o := range ops {
		ret := int64(o.Return)
		if o.Outcome == OutcomeUnknown {
			ret = math.MaxInt64 // it may take effect at any time after its call
		}
		if o.Kind == ConfigGet && o.Outcome != OutcomeOK {
			continue // a failed read tells nothing
		}
		hist = append(hist, porcupine.Operation{ClientId: o.Client, Input: o, Call: int64(o.Call), Output: o, Return: ret})
	}
	res := LinearizabilityResult{Ops: len(hist)}
	if len(hist) == 0 {
		res.Result = porcupine.Ok
		return res
	}
	model := configModel.ToModel()
	r, info := porcupine.CheckOperationsVerbose(model, hist, timeout)
	res.Result = r
	switch r {
	case porcupine.Illegal:
		res.Violations = append(res.Violations, Violation{"linearizability", "config history is not linearizable:\n" + excerpt(hist, info, model)})
	case porcupine.Unknown:
		res.Violations = append(res.Violations, Violation{"linearizability", fmt.Sprintf("porcupine could not decide %d operations within %v (result unknown)", len(hist), timeout)})
	}
	return res
}

// excerpt describes, for each key that failed, the end of the longest
// linearizable prefix porcupine found and the earliest operations that
// could not follow it.
func excerpt(hist []porcupine.Operation, info porcupine.LinearizationInfo, model porcupine.Model) string {
	var b strings.Builder
	line := func(op porcupine.Operation) {
		fmt.Fprintf(&b, "    client %d [%v, %v] %s\n", op.ClientId, time.Duration(op.Call), retString(op.Return), model.DescribeOperation(op.Input, op.Output))
	}
	for _, partials := range info.PartialLinearizationsOperations() {
		var longest []porcupine.Operation
		for _, l := range partials {
			if len(l) > len(longest) {
				longest = l
			}
		}
		if len(longest) == 0 {
			continue
		}
		key := longest[0].Input.(ConfigOp).Key
		in := map[[2]int64]bool{}
		for _, op := range longest {
			in[[2]int64{int64(op.ClientId), op.Call}] = true
		}
		var rest []porcupine.Operation
		for _, op := range hist {
			if op.Input.(ConfigOp).Key == key && !in[[2]int64{int64(op.ClientId), op.Call}] {
				rest = append(rest, op)
			}
		}
		sort.Slice(rest, func(i, j int) bool { return rest[i].Call < rest[j].Call })
		fmt.Fprintf(&b, "  key %s: the longest linearizable prefix has %d of %d ops; its last ones:\n", key, len(longest), len(longest)+len(rest))
		for _, op := range longest[max(0, len(longest)-8):] {
			line(op)
		}
		fmt.Fprintf(&b, "  none of these can come next:\n")
		for _, op := range rest[:min(6, len(rest))] {
			line(op)
		}
		if b.Len() > 8000 {
			break
		}
	}
	return b.String()
}

func retString(r int64) string {
	if r == math.MaxInt64 {
		return "∞"
	}
	return time.Duration(r).String()
}
