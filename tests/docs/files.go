package docs

import (
	"fmt"
	"os"
	"path/filepath"
)

// placeFiles copies the user's files a files marker names from dir (the
// test's testdata/files) into the working directory, executable.
func placeFiles(dir, workdir string, names []string) error {
	for _, n := range names {
		if filepath.Base(n) != n {
			return fmt.Errorf("files %q: a name in testdata/files, not a path", n)
		}
		data, err := os.ReadFile(filepath.Join(dir, n))
		if err != nil {
			return fmt.Errorf("files %s: %w", n, err)
		}
		if err := os.WriteFile(filepath.Join(workdir, n), data, 0o755); err != nil {
			return err
		}
	}
	return nil
}
