package dirfsm

import "testing"

func TestBalanceLeaders(t *testing.T) {
	five := []uint64{1, 2, 3, 4, 5}
	cases := []struct {
		name    string
		leaders map[string]uint64
		voters  map[string][]uint64
		want    Transfer
		ok      bool
	}{
		{"all on lockd 1", map[string]uint64{"a": 1, "b": 1, "c": 1}, map[string][]uint64{"a": five, "b": five, "c": five}, Transfer{"a", 1, 2}, true},
		{"spread already", map[string]uint64{"a": 1, "b": 2, "c": 3}, map[string][]uint64{"a": five, "b": five, "c": five}, Transfer{}, false},
		{"two on one, one off by one", map[string]uint64{"a": 1, "b": 1}, map[string][]uint64{"a": five, "b": five}, Transfer{"a", 1, 2}, true},
		{"no voter on an idle lockd", map[string]uint64{"a": 1, "b": 1}, map[string][]uint64{"a": {1}, "b": {1}}, Transfer{}, false},
		{"to the idle sixth", map[string]uint64{"a": 1, "b": 2, "c": 3, "d": 4, "e": 5, "f": 5}, map[string][]uint64{"a": five, "b": five, "c": five, "d": five, "e": five, "f": {2, 3, 4, 5, 6}}, Transfer{"f", 5, 6}, true},
	}
	for _, tc := range cases {
		got, ok := BalanceLeaders(tc.leaders, tc.voters)
		if ok != tc.ok || got != tc.want {
			t.Errorf("%s: %+v %v, want %+v %v", tc.name, got, ok, tc.want, tc.ok)
		}
	}
}
