// go-rsa: the Go peer for bench/run.sh. It makes N RSA keys one after another with Go's
// crypto/rsa, as kubeadm does for its PKI and kubeconfigs (16 keys with RSA-2048: 10
// certificates, sa.key, 5 kubeconfigs), and writes each as a PKCS#8 PEM file into DIR, so the
// work matches kubestrap's (generate, encode, write).
//
// usage: go-rsa [-n 16] [-bits 2048] DIR
package main

import (
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"flag"
	"fmt"
	"os"
	"path/filepath"
)

func main() {
	n := flag.Int("n", 16, "number of keys")
	bits := flag.Int("bits", 2048, "RSA modulus size")
	flag.Parse()
	if flag.NArg() != 1 {
		fmt.Fprintln(os.Stderr, "usage: go-rsa [-n N] [-bits B] DIR")
		os.Exit(2)
	}
	dir := flag.Arg(0)
	for i := 0; i < *n; i++ {
		key, err := rsa.GenerateKey(rand.Reader, *bits)
		if err != nil {
			fmt.Fprintln(os.Stderr, "generating key:", err)
			os.Exit(1)
		}
		der, err := x509.MarshalPKCS8PrivateKey(key)
		if err != nil {
			fmt.Fprintln(os.Stderr, "encoding key:", err)
			os.Exit(1)
		}
		block := pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der})
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("key%02d.key", i)), block, 0o600); err != nil {
			fmt.Fprintln(os.Stderr, "writing key:", err)
			os.Exit(1)
		}
	}
}
