// Command verify_note is the stock verifier that pgcld's signed notes (core/audit/log/note.h) are
// held against: Go's golang.org/x/mod/sumdb/note (the C2SP signed-note reference implementation),
// driven by tests/integration/test_note_stock_verifier.py. Built in GOPATH mode against Debian's
// golang-golang-x-mod-dev (GO111MODULE=off GOPATH=/usr/share/gocode), so nothing is downloaded.
//
// x/mod 0.7.0 knows only note signatures (algorithm 0x01). Cosignatures (c2sp.org/tlog-cosignature,
// algorithm 0x04) and checkpoint texts (c2sp.org/tlog-checkpoint) are written here from the
// specifications with crypto/ed25519: still a second implementation, independent of the C one.
//
//	verify_note keygen NAME                  a new signer key and its verifier key (note.GenerateKey)
//	verify_note vkey NAME PUBHEX             the verifier key of an Ed25519 public key (note.NewEd25519VerifierKey)
//	verify_note sign SKEY... <TEXT           the note signed by each key (note.NewSigner, note.Sign)
//	verify_note verify [-c CVKEY]... VKEY... <NOTE
//	                                         its text when note.Open accepts it with these keys
//	                                         (-c: a cosigner's key, algorithm 0x04); verdicts on stderr
//	verify_note verify-batch [-c CVKEY]... VKEY... <LINES
//	                                         per line (a note in base64): "ok <base64 of its text>" or "refused"
//	verify_note cosign SKEY TIME <CHECKPOINT a cosignature/v1 line by a signer key of algorithm 0x04
//	verify_note checkpoint <TEXT             "<origin> <size> <root hex> <extension lines>" of a checkpoint text
//
// Exit status: 0 done, 1 refused (the reason on stderr), 2 usage.
package main

import (
	"bufio"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"strconv"
	"strings"

	"golang.org/x/mod/sumdb/note"
)

const algCosignatureV1 = 0x04

func fail(format string, args ...interface{}) {
	fmt.Fprintf(os.Stderr, "verify_note: "+format+"\n", args...)
	os.Exit(1)
}

func usage() {
	fmt.Fprintln(os.Stderr, "usage: verify_note keygen|vkey|sign|verify|verify-batch|cosign|checkpoint ... (see main.go)")
	os.Exit(2)
}

func stdin() []byte {
	b, err := io.ReadAll(os.Stdin)
	if err != nil {
		fail("reading stdin: %v", err)
	}
	return b
}

// keyID is the C2SP key ID: SHA-256(name ‖ 0x0A ‖ alg ‖ key)[:4], big-endian.
func keyID(name string, alg byte, key []byte) uint32 {
	h := sha256.New()
	h.Write([]byte(name + "\n"))
	h.Write([]byte{alg})
	h.Write(key)
	return binary.BigEndian.Uint32(h.Sum(nil))
}

// cosigner verifies cosignature/v1 signatures: an 8-byte big-endian timestamp, then Ed25519 over
// "cosignature/v1\ntime <T>\n" and the note text. It is a note.Verifier, so note.Open drives it.
type cosigner struct {
	name string
	id   uint32
	key  ed25519.PublicKey
}

func (c *cosigner) Name() string    { return c.name }
func (c *cosigner) KeyHash() uint32 { return c.id }
func (c *cosigner) Verify(msg, sig []byte) bool {
	if len(sig) != 8+ed25519.SignatureSize {
		return false
	}
	t := binary.BigEndian.Uint64(sig)
	if t > math.MaxInt64 {
		return false
	}
	signed := append([]byte(fmt.Sprintf("cosignature/v1\ntime %d\n", t)), msg...)
	return ed25519.Verify(c.key, signed, sig[8:])
}

// splitKey reads "<name>+<hex8>+<base64(alg ‖ 32 bytes)>".
func splitKey(s string) (name string, id uint32, alg byte, key []byte, err error) {
	parts := strings.SplitN(s, "+", 3)
	if len(parts) != 3 || len(parts[1]) != 8 {
		return "", 0, 0, nil, errors.New("not <name>+<hex8>+<base64>")
	}
	n, err := strconv.ParseUint(parts[1], 16, 32)
	if err != nil {
		return "", 0, 0, nil, err
	}
	raw, err := base64.StdEncoding.DecodeString(parts[2])
	if err != nil || len(raw) != 33 {
		return "", 0, 0, nil, errors.New("the key is not base64 of 33 bytes")
	}
	return parts[0], uint32(n), raw[0], raw[1:], nil
}

func newCosigner(vkey string) *cosigner {
	name, id, alg, key, err := splitKey(vkey)
	if err != nil || alg != algCosignatureV1 || keyID(name, alg, key) != id {
		fail("cosigner key %q: not a cosignature/v1 verifier key (%v)", vkey, err)
	}
	return &cosigner{name: name, id: id, key: ed25519.PublicKey(key)}
}

// verifiers reads [-c CVKEY]... VKEY... into a note.Verifiers.
func verifiers(args []string) note.Verifiers {
	var list []note.Verifier
	for i := 0; i < len(args); i++ {
		if args[i] == "-c" && i+1 < len(args) {
			list = append(list, newCosigner(args[i+1]))
			i++
			continue
		}
		v, err := note.NewVerifier(args[i])
		if err != nil {
			fail("verifier key %q: %v", args[i], err)
		}
		list = append(list, v)
	}
	return note.VerifierList(list...)
}

func cosign(skey string, t uint64, text []byte) string {
	if !strings.HasPrefix(skey, "PRIVATE+KEY+") {
		fail("cosign: not a signer key")
	}
	name, id, alg, seed, err := splitKey(strings.TrimPrefix(skey, "PRIVATE+KEY+"))
	if err != nil || alg != algCosignatureV1 {
		fail("cosign: not a cosignature/v1 signer key (%v)", err)
	}
	priv := ed25519.NewKeyFromSeed(seed)
	if keyID(name, alg, priv.Public().(ed25519.PublicKey)) != id {
		fail("cosign: the key ID is not the key's")
	}
	signed := append([]byte(fmt.Sprintf("cosignature/v1\ntime %d\n", t)), text...)
	sig := make([]byte, 12, 12+ed25519.SignatureSize)
	binary.BigEndian.PutUint32(sig, id)
	binary.BigEndian.PutUint64(sig[4:], t)
	sig = append(sig, ed25519.Sign(priv, signed)...)
	return "— " + name + " " + base64.StdEncoding.EncodeToString(sig) + "\n"
}

// checkpoint parses a tlog-checkpoint text as the specification words it.
func checkpoint(text string) (string, error) {
	if !strings.HasSuffix(text, "\n") {
		return "", errors.New("no final newline")
	}
	lines := strings.Split(strings.TrimSuffix(text, "\n"), "\n")
	if len(lines) < 3 {
		return "", errors.New("fewer than three lines")
	}
	for _, l := range lines {
		if l == "" {
			return "", errors.New("an empty line")
		}
	}
	size, err := strconv.ParseUint(lines[1], 10, 63)
	if err != nil || strconv.FormatUint(size, 10) != lines[1] {
		return "", errors.New("the size is not canonical decimal")
	}
	root, err := base64.StdEncoding.Strict().DecodeString(lines[2])
	if err != nil || len(root) != 32 {
		return "", errors.New("the root is not base64 of 32 bytes")
	}
	return fmt.Sprintf("%s %d %s %d", lines[0], size, hex.EncodeToString(root), len(lines)-3), nil
}

func main() {
	if len(os.Args) < 2 {
		usage()
	}
	args := os.Args[2:]
	switch os.Args[1] {
	case "keygen":
		if len(args) != 1 {
			usage()
		}
		skey, vkey, err := note.GenerateKey(rand.Reader, args[0])
		if err != nil {
			fail("keygen: %v", err)
		}
		fmt.Printf("%s\n%s\n", skey, vkey)
	case "vkey":
		if len(args) != 2 {
			usage()
		}
		pub, err := hex.DecodeString(args[1])
		if err != nil {
			fail("vkey: %v", err)
		}
		vkey, err := note.NewEd25519VerifierKey(args[0], ed25519.PublicKey(pub))
		if err != nil {
			fail("vkey: %v", err)
		}
		fmt.Println(vkey)
	case "sign":
		var signers []note.Signer
		for _, skey := range args {
			s, err := note.NewSigner(skey)
			if err != nil {
				fail("signer key: %v", err)
			}
			signers = append(signers, s)
		}
		msg, err := note.Sign(&note.Note{Text: string(stdin())}, signers...)
		if err != nil {
			fail("sign: %v", err)
		}
		os.Stdout.Write(msg)
	case "verify":
		n, err := note.Open(stdin(), verifiers(args))
		if err != nil {
			fail("refused: %v", err)
		}
		for _, s := range n.Sigs {
			fmt.Fprintf(os.Stderr, "verified %s+%08x\n", s.Name, s.Hash)
		}
		for _, s := range n.UnverifiedSigs {
			fmt.Fprintf(os.Stderr, "unknown %s+%08x\n", s.Name, s.Hash)
		}
		os.Stdout.WriteString(n.Text)
	case "verify-batch":
		known := verifiers(args)
		in := bufio.NewScanner(os.Stdin)
		in.Buffer(make([]byte, 1<<20), 16<<20)
		out := bufio.NewWriter(os.Stdout)
		for in.Scan() {
			msg, err := base64.StdEncoding.DecodeString(in.Text())
			if err != nil {
				fmt.Fprintln(out, "bad-input")
				continue
			}
			if n, err := note.Open(msg, known); err != nil {
				fmt.Fprintf(out, "refused %v\n", err)
			} else {
				fmt.Fprintf(out, "ok %s\n", base64.StdEncoding.EncodeToString([]byte(n.Text)))
			}
		}
		out.Flush()
	case "cosign":
		if len(args) != 2 {
			usage()
		}
		t, err := strconv.ParseUint(args[1], 10, 64)
		if err != nil {
			fail("cosign: time %q: %v", args[1], err)
		}
		os.Stdout.WriteString(cosign(args[0], t, stdin()))
	case "checkpoint":
		s, err := checkpoint(string(stdin()))
		if err != nil {
			fail("checkpoint refused: %v", err)
		}
		fmt.Println(s)
	default:
		usage()
	}
}
