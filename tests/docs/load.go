package docs

import (
	"os"
	"path/filepath"
	"sort"
)

// DocFiles are the files whose blocks run, relative to the repository
// root, in the order they run: README.md, then docs/*.md sorted.
func DocFiles(root string) ([]string, error) {
	files, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		return nil, err
	}
	sort.Strings(files)
	out := []string{"README.md"}
	for _, f := range files {
		rel, err := filepath.Rel(root, f)
		if err != nil {
			return nil, err
		}
		out = append(out, filepath.ToSlash(rel))
	}
	return out, nil
}

// Load extracts the blocks of every doc file under root, in run order.
// The errors are files that cannot be read and markers of no block.
func Load(root string) ([]Block, []error) {
	files, err := DocFiles(root)
	if err != nil {
		return nil, []error{err}
	}
	var (
		blocks []Block
		errs   []error
	)
	for _, f := range files {
		text, err := os.ReadFile(filepath.Join(root, f))
		if err != nil {
			errs = append(errs, err)
			continue
		}
		bs, es := Extract(f, string(text))
		blocks = append(blocks, bs...)
		errs = append(errs, es...)
	}
	return blocks, errs
}
