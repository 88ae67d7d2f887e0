// Command corefileoracle prints what corefile-migration (the version kubeadm pins) makes of
// Corefiles, for kubestrap's tests to compare with: for each file named on the command line
// (after FROM and TO, CoreDNS versions without the "v"), one JSON line with the servers as the
// tool parses them, its Unsupported notices (or error) and Migrate's error.
package main

import (
	"encoding/json"
	"fmt"
	"os"

	"github.com/coredns/corefile-migration/migration"
	"github.com/coredns/corefile-migration/migration/corefile"
)

type option struct {
	Name string   `json:"name"`
	Args []string `json:"args"`
}

type plugin struct {
	Name    string   `json:"name"`
	Args    []string `json:"args"`
	Options []option `json:"options"`
}

type server struct {
	Keys    []string `json:"keys"`
	Plugins []plugin `json:"plugins"`
}

type verdict struct {
	File             string   `json:"file"`
	Servers          []server `json:"servers"`
	Unsupported      []string `json:"unsupported"`
	UnsupportedError string   `json:"unsupported_error"`
	MigrateError     string   `json:"migrate_error"`
}

func main() {
	if len(os.Args) < 3 {
		fmt.Fprintln(os.Stderr, "usage: corefileoracle FROM TO FILE...")
		os.Exit(2)
	}
	from, to := os.Args[1], os.Args[2]
	out := json.NewEncoder(os.Stdout)
	for _, f := range os.Args[3:] {
		b, err := os.ReadFile(f)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		v := verdict{File: f, Servers: []server{}, Unsupported: []string{}}
		cf, _ := corefile.New(string(b))
		for _, s := range cf.Servers {
			srv := server{Keys: nonNil(s.DomPorts), Plugins: []plugin{}}
			for _, p := range s.Plugins {
				pl := plugin{Name: p.Name, Args: nonNil(p.Args), Options: []option{}}
				for _, o := range p.Options {
					pl.Options = append(pl.Options, option{Name: o.Name, Args: nonNil(o.Args)})
				}
				srv.Plugins = append(srv.Plugins, pl)
			}
			v.Servers = append(v.Servers, srv)
		}
		notices, err := migration.Unsupported(from, to, string(b))
		if err != nil {
			v.UnsupportedError = err.Error()
		}
		for _, n := range notices {
			v.Unsupported = append(v.Unsupported, n.ToString())
		}
		if _, err := migration.Migrate(from, to, string(b), false); err != nil {
			v.MigrateError = err.Error()
		}
		if err := out.Encode(v); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
	}
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}
