package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"sort"
	"strconv"
	"strings"
)

// envName is the MUXD_* twin of a flag: --max-sessions → MUXD_MAX_SESSIONS.
func envName(flagName string) string {
	return "MUXD_" + strings.ToUpper(strings.ReplaceAll(flagName, "-", "_"))
}

// applyEnv sets every flag not given on the command line from its MUXD_*
// twin. Flags in skip have no twin.
func applyEnv(fs *flag.FlagSet, skip ...string) error {
	given := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { given[f.Name] = true })
	var err error
	fs.VisitAll(func(f *flag.Flag) {
		if err != nil || given[f.Name] || contains(skip, f.Name) {
			return
		}
		v, ok := os.LookupEnv(envName(f.Name))
		if !ok {
			return
		}
		if e := fs.Set(f.Name, v); e != nil {
			err = fmt.Errorf("%s=%q: %v", envName(f.Name), v, e)
		}
	})
	return err
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// printFlags writes each flag with its env twin and default.
func printFlags(w io.Writer, fs *flag.FlagSet, noEnv ...string) {
	var names []string
	fs.VisitAll(func(f *flag.Flag) { names = append(names, f.Name) })
	sort.Strings(names)
	for _, n := range names {
		f := fs.Lookup(n)
		arg, usage := flag.UnquoteUsage(f)
		head := "  --" + n
		if len(n) == 1 {
			head = "  -" + n // as the usage lines write it
		}
		if arg != "" {
			head += " " + arg
		}
		fmt.Fprintf(w, "%s\n    \t%s", head, usage)
		var extra []string
		if !contains(noEnv, n) {
			extra = append(extra, "env "+envName(n))
		}
		if f.DefValue != "" && f.DefValue != "false" && f.DefValue != "0" && f.DefValue != "0s" {
			extra = append(extra, "default "+f.DefValue)
		}
		if len(extra) > 0 {
			fmt.Fprintf(w, " (%s)", strings.Join(extra, ", "))
		}
		fmt.Fprintln(w)
	}
}

// sizeFlag is a byte count that accepts suffixes: 512K, 64MiB, 1G.
type sizeFlag struct{ p *int64 }

func (s sizeFlag) String() string {
	if s.p == nil {
		return ""
	}
	return formatSize(*s.p)
}

func (s sizeFlag) Set(v string) error {
	n, err := parseSize(v)
	if err != nil {
		return err
	}
	*s.p = n
	return nil
}

func parseSize(v string) (int64, error) {
	t := strings.TrimSpace(strings.ToUpper(v))
	mult := int64(1)
	for _, u := range []struct {
		suffix string
		mult   int64
	}{{"GIB", 1 << 30}, {"MIB", 1 << 20}, {"KIB", 1 << 10}, {"GB", 1 << 30}, {"MB", 1 << 20}, {"KB", 1 << 10},
		{"G", 1 << 30}, {"M", 1 << 20}, {"K", 1 << 10}, {"B", 1}} {
		if strings.HasSuffix(t, u.suffix) {
			t, mult = strings.TrimSpace(strings.TrimSuffix(t, u.suffix)), u.mult
			break
		}
	}
	n, err := strconv.ParseInt(t, 10, 64)
	if err != nil || n < 0 || n > (1<<62)/mult {
		return 0, fmt.Errorf("bad size %q (want e.g. 65536, 512KiB, 64MiB, 1GiB)", v)
	}
	return n * mult, nil
}

func formatSize(n int64) string {
	switch {
	case n >= 1<<30 && n%(1<<30) == 0:
		return strconv.FormatInt(n>>30, 10) + "GiB"
	case n >= 1<<20 && n%(1<<20) == 0:
		return strconv.FormatInt(n>>20, 10) + "MiB"
	case n >= 1<<10 && n%(1<<10) == 0:
		return strconv.FormatInt(n>>10, 10) + "KiB"
	}
	return strconv.FormatInt(n, 10)
}

// intSize adapts an int field to sizeFlag.
type intSize struct{ p *int }

func (s intSize) String() string {
	if s.p == nil {
		return ""
	}
	return formatSize(int64(*s.p))
}

func (s intSize) Set(v string) error {
	n, err := parseSize(v)
	if err != nil {
		return err
	}
	if n > 1<<31-1 {
		return fmt.Errorf("size %q too large", v)
	}
	*s.p = int(n)
	return nil
}

// listFlag is a comma-separated list.
type listFlag struct{ p *[]string }

func (l listFlag) String() string {
	if l.p == nil {
		return ""
	}
	return strings.Join(*l.p, ",")
}

func (l listFlag) Set(v string) error {
	*l.p = nil
	for _, s := range strings.Split(v, ",") {
		if s = strings.TrimSpace(s); s != "" {
			*l.p = append(*l.p, s)
		}
	}
	return nil
}
