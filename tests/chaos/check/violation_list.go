package check

import "fmt"

// violationList collects one checker's violations in the order found.
type violationList struct {
	checker string
	list    []Violation
}

// add records one violation, its detail formatted as fmt.Sprintf does.
func (v *violationList) add(format string, args ...any) {
	v.list = append(v.list, Violation{v.checker, fmt.Sprintf(format, args...)})
}
