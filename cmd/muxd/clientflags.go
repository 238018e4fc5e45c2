package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"net/url"
	"os"
	"strings"
)

// clientOpts are the flags every client command shares.
type clientOpts struct {
	url       string
	tokenFile string
	// urlEnv and tokenEnv say the value came from the flag's environment
	// twin (MUXD_URL, MUXD_TOKEN_FILE), for errors to name it.
	urlEnv, tokenEnv bool
}

func addClientFlags(fs *flag.FlagSet, o *clientOpts) {
	fs.StringVar(&o.url, "url", "http://127.0.0.1:3000", "daemon `url` (http://, https://, ws:// or wss://)")
	fs.StringVar(&o.tokenFile, "token-file", "", "read the access token from `file` (else MUXD_TOKEN)")
}

// parseClientFlags parses args, applying MUXD_URL/MUXD_TOKEN_FILE when the
// flags are not given. It returns false and an exit code when the command
// should stop (help or a bad flag).
//
// Only the daemon's address and token have environment twins: a variable
// like MUXD_TIMEOUT would reach every command with a --timeout (exec and
// health alike), and set for one it would change the other.
func parseClientFlags(fs *flag.FlagSet, o *clientOpts, args []string, usage string, stderr io.Writer) (bool, int) {
	var noEnv []string
	fs.VisitAll(func(f *flag.Flag) {
		if f.Name != "url" && f.Name != "token-file" {
			noEnv = append(noEnv, f.Name)
		}
	})
	if ok, code := parseFlags(fs, args, func(w io.Writer) {
		fmt.Fprint(w, usage)
		printFlags(w, fs, noEnv...)
	}, stderr); !ok {
		return false, code
	}
	given := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { given[f.Name] = true })
	if err := applyEnv(fs, noEnv...); err != nil {
		fmt.Fprintf(stderr, "muxd: %v\n", err)
		return false, 2
	}
	o.urlEnv = !given["url"] && os.Getenv("MUXD_URL") != ""
	o.tokenEnv = !given["token-file"] && os.Getenv("MUXD_TOKEN_FILE") != ""
	return true, 0
}

// token returns the token from --token-file or MUXD_TOKEN ("" = none).
func (o *clientOpts) token() (string, error) {
	if o.tokenFile != "" {
		b, err := os.ReadFile(o.tokenFile)
		if err != nil {
			return "", fmt.Errorf("%s: %v", o.tokenName(), err)
		}
		return strings.TrimRight(string(b), "\r\n"), nil
	}
	return os.Getenv("MUXD_TOKEN"), nil
}

// httpURL returns the daemon URL with an http(s) scheme and path p.
func (o *clientOpts) httpURL(p string) (string, error) {
	u, err := url.Parse(o.url)
	if err != nil || u.Host == "" {
		return "", fmt.Errorf("%s %q: want e.g. http://127.0.0.1:3000", o.urlName(), o.url)
	}
	switch u.Scheme {
	case "ws":
		u.Scheme = "http"
	case "wss":
		u.Scheme = "https"
	case "http", "https":
	default:
		return "", fmt.Errorf("%s %q: scheme must be http, https, ws or wss", o.urlName(), o.url)
	}
	u.Path = p
	u.RawQuery = ""
	return u.String(), nil
}

// urlName and tokenName name where the URL and token file came from.
func (o *clientOpts) urlName() string {
	if o.urlEnv {
		return "MUXD_URL"
	}
	return "--url"
}

func (o *clientOpts) tokenName() string {
	if o.tokenEnv {
		return "MUXD_TOKEN_FILE"
	}
	return "--token-file"
}

// helpOut is where a --help asked for goes: stdout (muxd exec --help |
// less); run sets it.
var helpOut io.Writer = os.Stdout

// parseFlags parses args into fs: a --help prints usage to helpOut and a
// bad flag its error and usage to stderr (false, with the exit code).
func parseFlags(fs *flag.FlagSet, args []string, usage func(io.Writer), stderr io.Writer) (bool, int) {
	fs.SetOutput(io.Discard) // the errors are printed here
	fs.Usage = func() {}
	err := fs.Parse(args)
	switch {
	case err == nil:
		return true, 0
	case errors.Is(err, flag.ErrHelp):
		usage(helpOut)
		return false, 0
	}
	// The error, and where the flags are: the whole usage would bury it.
	fmt.Fprintf(stderr, "%s: %v (see %s --help)\n", fs.Name(), err, fs.Name())
	return false, 2
}
