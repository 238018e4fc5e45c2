package proc

import (
	"errors"
	"fmt"
	"sort"
	"strings"
)

// ErrInvalidEnv reports an environment variable name or value that cannot
// be passed to a child.
var ErrInvalidEnv = errors.New("proc: invalid environment variable")

// hidden reports whether a variable of muxd's own environment must not
// reach children unless given explicitly: muxd's secrets and settings, the
// variables that make a non-interactive bash source a file, and the tree
// mark of whatever started muxd ([Start] sets the child's own).
func hidden(name string) bool {
	return strings.HasPrefix(name, "MUXD_") || name == "BASH_ENV" || name == "ENV" || name == MarkVar
}

// Env builds a child's environment: base (usually os.Environ()) without
// MUXD_*, BASH_ENV, ENV and MarkVar, then set applied in name order (a nil
// value unsets; hidden names are allowed when given here explicitly,
// except MarkVar, which [Start] always sets). LANG
// defaults to C.UTF-8, and so does LC_ALL when LANG was not chosen either,
// so tools never fall back to ASCII; a nil in set for either name keeps
// it unset.
func Env(base []string, set map[string]*string) ([]string, error) {
	vars := make(map[string]string, len(base)+len(set))
	order := make([]string, 0, len(base)+len(set))
	put := func(k, v string) {
		if _, ok := vars[k]; !ok {
			order = append(order, k)
		}
		vars[k] = v
	}
	for _, kv := range base {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" || hidden(k) {
			continue
		}
		put(k, v)
	}
	names := make([]string, 0, len(set))
	for k := range set {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, k := range names {
		if err := ValidateName(k); err != nil {
			return nil, err
		}
		v := set[k]
		if v == nil {
			delete(vars, k)
			continue
		}
		if strings.IndexByte(*v, 0) >= 0 {
			return nil, fmt.Errorf("%w: value of %s contains a NUL byte", ErrInvalidEnv, k)
		}
		put(k, *v)
	}
	// A name set explicitly, to a value or to nil, is the caller's choice.
	_, hasLang := vars["LANG"]
	_, hasAll := vars["LC_ALL"]
	_, setLang := set["LANG"]
	_, setAll := set["LC_ALL"]
	if !hasLang && !setLang {
		put("LANG", "C.UTF-8")
		if !hasAll && !setAll {
			put("LC_ALL", "C.UTF-8")
		}
	}
	out := make([]string, 0, len(vars))
	for _, k := range order {
		if v, ok := vars[k]; ok {
			out = append(out, k+"="+v)
		}
	}
	return out, nil
}

// ValidateName checks that name can be an environment variable name: not
// empty, no '=' and no NUL.
func ValidateName(name string) error {
	switch {
	case name == "":
		return fmt.Errorf("%w: empty name", ErrInvalidEnv)
	case strings.ContainsAny(name, "=\x00"):
		return fmt.Errorf("%w: name %q contains '=' or NUL", ErrInvalidEnv, name)
	}
	return nil
}
