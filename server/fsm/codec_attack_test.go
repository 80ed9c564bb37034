package fsm

import (
	"bytes"
	"encoding/binary"
	"math/rand"
	"reflect"
	"testing"

	"github.com/lockservice/lockd/api"
)

// how much a version-1 entry of n bytes makes the decoder
// allocate (the log is the leader's, but a replica decodes whatever the
// log holds, and so does a restore of a corrupt log).
func TestAttackDecodeAmplification(t *testing.T) {
	n := maxCodecNodes
	b := []byte{codecV1, cmdNodes}
	b = binary.AppendUvarint(b, uint64(n))
	b = append(b, make([]byte, n)...) // n empty node messages
	b = append(b, codecEnd)
	var c Command
	alloc := allocatedBytes(1, func() {
		var err error
		c, err = DecodeCommand(b)
		if err != nil {
			t.Fatal(err)
		}
	})
	t.Logf("an entry of %d bytes decodes to %d nodes, %d bytes allocated (%.0fx)", len(b), len(c.Nodes), alloc, float64(alloc)/float64(len(b)))
	// Each node decodes to a struct of about 100 bytes whatever its size
	// on the wire, so the ratio is fixed; what bounds the cost is
	// maxCodecNodes: under 1 MiB for the largest page a decoder takes.
	if alloc > 1<<20 {
		t.Errorf("%d bytes allocated for one entry's nodes, over 1 MiB", alloc)
	}
}

// Round trip of tricky values: nil vs empty, Version nil vs 0, negative
// ints, big values, invalid UTF-8, embedded end bytes.
func TestAttackRoundTripEdges(t *testing.T) {
	big := bytes.Repeat([]byte{0, 0x7f, 0x80, 0xff}, 70_000)
	cases := []Command{
		{},
		{Op: OpPut, Version: u64(0)},
		{Op: OpPut, Version: u64(^uint64(0)), Value: big[:65536]},
		{Op: OpCreate, Path: "/d/\xff\xfe", Value: []byte{0}, LockDelayMS: -1, AtMS: -1 << 62, LeaseMS: -(1 << 63)},
		{Op: Op("future_op\x00"), Lock: "weird\x00", Sessions: []uint64{0, ^uint64(0)}},
		{Op: OpStagePrefix, Nodes: make([]api.ExportedNode, 0)},
		{Op: OpLeaderStart, Restored: &RestoreStart{}},
		{Op: OpLeaderStart, Restored: &RestoreStart{Prefixes: []string{"", "/é", string(big[:300])}}},
	}
	for i, c := range cases {
		got, err := DecodeCommand(c.Encode())
		if err != nil {
			t.Fatalf("case %d: %v", i, err)
		}
		if !reflect.DeepEqual(normCmd(c), got) {
			t.Errorf("case %d: round trip\n got %+v\nwant %+v", i, got, c)
		}
	}
	// random commands from the generator, all fields
	rng := rand.New(rand.NewSource(25))
	for i := 0; i < 2000; i++ {
		c := fullCommand(codecOps[1+rng.Intn(len(codecOps)-1)])
		c.Request = rng.Uint64()
		c.AtMS = rng.Int63() - rng.Int63()
		got, err := DecodeCommand(c.Encode())
		if err != nil || !reflect.DeepEqual(got, c) {
			t.Fatalf("random %d: %v\n got %+v\nwant %+v", i, err, got, c)
		}
	}
}

// normCmd: what the codec documents it keeps (an empty slice reads as nil).
func normCmd(c Command) Command {
	if len(c.Value) == 0 {
		c.Value = nil
	}
	if len(c.Nodes) == 0 {
		c.Nodes = nil
	}
	if len(c.Sessions) == 0 {
		c.Sessions = nil
	}
	return c
}

// The encoder writes what its own decoder refuses: a string or byte field
// over maxCodecBytes (api.MaxRequestBody) encodes without complaint, and
// then every replica applies the entry as undecodable.
func TestAttackEncoderWritesWhatDecoderRefuses(t *testing.T) {
	c := Command{Op: OpPut, Path: "/demo/x", Value: make([]byte, maxCodecBytes+1)}
	if _, err := DecodeCommand(c.Encode()); err != nil {
		t.Fatalf("Encode wrote an entry DecodeCommand refuses: %v", err)
	}
}
