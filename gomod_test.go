// Package sluice_test checks the module as a whole: go.mod says which modules sluice imports itself.
package sluice_test

import (
	"bufio"
	"bytes"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
)

// goTool runs the go command in the module root and returns its standard output.
func goTool(t *testing.T, args ...string) []byte {
	t.Helper()
	path, err := exec.LookPath("go")
	if err != nil {
		path = filepath.Join(runtime.GOROOT(), "bin", "go")
	}
	cmd := exec.Command(path, args...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
	}
	return out
}

// requirements reads go.mod's require directives: module path -> marked "// indirect".
func requirements(t *testing.T) map[string]bool {
	t.Helper()
	raw, err := os.ReadFile("go.mod")
	if err != nil {
		t.Fatal(err)
	}
	required := map[string]bool{}
	inBlock := false
	scanner := bufio.NewScanner(bytes.NewReader(raw))
	for scanner.Scan() {
		line := strings.TrimSpace(scanner.Text())
		switch {
		case line == "require (":
			inBlock = true
			continue
		case inBlock && line == ")":
			inBlock = false
			continue
		case strings.HasPrefix(line, "require "):
			line = strings.TrimPrefix(line, "require ")
		case !inBlock:
			continue
		}
		if fields := strings.Fields(line); len(fields) >= 2 {
			required[fields[0]] = strings.HasSuffix(line, "// indirect")
		}
	}
	return required
}

// TestGoModListsImportedModulesAsDirect: a module that a package of sluice imports (tests included)
// must be a direct requirement in go.mod, and one that none imports must be marked indirect, as
// `go mod tidy` leaves them. klauspost/compress, imported for zstd, was marked indirect (issue 9).
func TestGoModListsImportedModulesAsDirect(t *testing.T) {
	self := strings.TrimSpace(string(goTool(t, "list", "-m")))
	imports := map[string]bool{}
	for _, path := range strings.Fields(string(goTool(t, "list", "-e", "-f",
		`{{join .Imports " "}} {{join .TestImports " "}} {{join .XTestImports " "}}`, "./..."))) {
		first, _, _ := strings.Cut(path, "/")
		if strings.Contains(first, ".") && path != self && !strings.HasPrefix(path, self+"/") {
			imports[path] = true
		}
	}
	if len(imports) == 0 {
		t.Fatal("go list found no imports outside the standard library")
	}
	args := append([]string{"list", "-e", "-f", "{{with .Module}}{{.Path}}{{end}}"}, slices.Sorted(maps.Keys(imports))...)
	direct := map[string]bool{}
	for _, module := range strings.Fields(string(goTool(t, args...))) {
		direct[module] = true
	}
	required := requirements(t)
	for module := range direct {
		indirect, ok := required[module]
		switch {
		case !ok:
			t.Errorf("go.mod does not require %s, which sluice imports", module)
		case indirect:
			t.Errorf("go.mod marks %s // indirect, but sluice imports it: run go mod tidy", module)
		}
	}
	for module, indirect := range required {
		if !indirect && !direct[module] {
			t.Errorf("go.mod lists %s as direct, but no package of sluice imports it: run go mod tidy", module)
		}
	}
	t.Logf("%d modules imported directly: %v", len(direct), slices.Sorted(maps.Keys(direct)))
}
