// verify_tiles checks a C2SP tlog-tiles log (https://c2sp.org/tlog-tiles) with Go's stock
// transparency-log code, golang.org/x/mod/sumdb/tlog and golang.org/x/mod/sumdb/note, so that what
// pgcld writes and serves is checked by code that is not pgcld's (issue 28).
//
//	verify_tiles [-key VKEY] [-old CHECKPOINT] [-origin ORIGIN] [-token TOKEN] BASE
//	verify_tiles -list [-token TOKEN] [-save DIR] [-old-dir DIR] URL
//
// BASE is a URL (http:// or https://) or a directory laid out as the spec serves a log:
// BASE/checkpoint, BASE/tile/<L>/<N>[.p/<W>], BASE/tile/entries/<N>[.p/<W>].
//
// With -list, URL is a pgcld daemon's: its list of logs (GET URL/log/, JSON {"logs": [{writer_id,
// origin, key, prefix, size}]}) is read and every log in it verified as below at URL + prefix,
// with the listed note verifier key (a log listed without one fails) and origin; -save DIR keeps
// each verified checkpoint as DIR/<writer_id>.checkpoint, and -old-dir DIR checks each log's
// consistency with the one kept there by an earlier run (when there is one). -token sends
// "Authorization: Bearer TOKEN" with every request (a pgcld API key: entry bundles need a reviewer).
//
//   - The checkpoint: with -key (a note verifier key, "name+hash+keydata"), note.Open must accept it
//     as signed by that key; without, it is read as a checkpoint body (or a note whose signatures
//     are not checked, which the summary says). Its body is parsed as C2SP tlog-checkpoint: origin
//     line, decimal size, base64 root hash, then optional extension lines — not with tlog.ParseTree,
//     which expects the Go checksum database's own origin line.
//   - The tree: tlog.TileHashReader over the log's tiles (Go's tiles of height 8, mapped onto C2SP
//     paths: no height component, "entries" for Go's "data"), which authenticates every tile it
//     reads against the checkpoint's root; tlog.TreeHash must give that root.
//   - Every full tile against its parent's hash, top level first (tlog.HashFromTile, tlog.NodeHash):
//     the tiles at the tree's edge are authenticated by the tree hash, and each full tile below by
//     its parent. tlog.TileHashReader alone does not do this for every tile it reads: in x/mod 0.7.0
//     (Debian's) its loop that checks tiles against their parents starts at the number of tree-hash
//     hashes rather than the number of tiles they occupy, so when several of those hashes share a
//     tile the first tiles read for the requested indexes go unchecked (a flipped leaf hash in
//     tile/0/100 of a 70,000-entry log came back from ReadHashes without an error; the record proofs
//     below would still refuse it, against the root).
//   - Every entry: read from the entry bundles (big-endian uint16 length-prefixed, exactly W entries
//     a bundle), leaf hash tlog.RecordHash(entry), and its inclusion proven with tlog.ProveRecord
//     and checked with tlog.CheckRecord.
//   - With -old (a path or URL of an older checkpoint of the same log): consistency with
//     tlog.ProveTree and tlog.CheckTree, then the older tree's own tiles (the log must still serve
//     the partial tiles of every size it published a checkpoint for).
//
// Exit status 0 with a one-line summary on stdout; 1 with "verify_tiles: FAIL: <reason>" on stderr
// when anything does not verify; 2 for a usage error.
//
// Built in GOPATH mode with Debian's golang-go and golang-golang-x-mod-dev:
//
//	GO111MODULE=off GOPATH=/usr/share/gocode go build -o verify_tiles ./tests/tlog/verify_tiles
package main

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"golang.org/x/mod/sumdb/note"
	"golang.org/x/mod/sumdb/tlog"
)

const (
	tileHeight = 8
	tileWidth  = 1 << tileHeight
	maxFetch   = 64 << 20 // the largest resource read: a full bundle of 256 entries of 65,535 bytes is 16 MiB
)

// source reads the log's resources by path relative to BASE.
type source struct {
	base   string
	isURL  bool
	client *http.Client
}

// bearer is sent as "Authorization: Bearer <bearer>" with every request when set (-token).
var bearer string

func newSource(base string) *source {
	isURL := strings.HasPrefix(base, "http://") || strings.HasPrefix(base, "https://")
	return &source{base: strings.TrimRight(base, "/"), isURL: isURL, client: &http.Client{Timeout: 60 * time.Second}}
}

func (s *source) fetch(rel string) ([]byte, error) {
	if !s.isURL {
		return os.ReadFile(filepath.Join(s.base, filepath.FromSlash(rel)))
	}
	return fetchURL(s.client, s.base+"/"+rel)
}

func fetchURL(client *http.Client, url string) ([]byte, error) {
	req, err := http.NewRequest("GET", url, nil)
	if err != nil {
		return nil, err
	}
	if bearer != "" {
		req.Header.Set("Authorization", "Bearer "+bearer)
	}
	resp, err := client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxFetch+1))
	if err != nil {
		return nil, fmt.Errorf("GET %s: %v", url, err)
	}
	if len(data) > maxFetch {
		return nil, fmt.Errorf("GET %s: more than %d bytes", url, maxFetch)
	}
	return data, nil
}

// checkpoint is a parsed C2SP tlog-checkpoint body.
type checkpoint struct {
	origin     string
	tree       tlog.Tree
	extensions []string
}

// parseCheckpoint parses a checkpoint body: "<origin>\n<size>\n<base64 root>\n" and optional
// non-empty extension lines, each ending in a newline. The size is decimal without leading zeros;
// the root is the canonical padded base64 of 32 bytes.
func parseCheckpoint(text string) (checkpoint, error) {
	var c checkpoint
	if !strings.HasSuffix(text, "\n") {
		return c, errors.New("checkpoint: the body does not end with a newline")
	}
	lines := strings.Split(strings.TrimSuffix(text, "\n"), "\n")
	if len(lines) < 3 {
		return c, fmt.Errorf("checkpoint: %d lines, want at least 3 (origin, size, root)", len(lines))
	}
	c.origin = lines[0]
	if c.origin == "" {
		return c, errors.New("checkpoint: empty origin line")
	}
	size := lines[1]
	if size == "" || (len(size) > 1 && size[0] == '0') || strings.Trim(size, "0123456789") != "" {
		return c, fmt.Errorf("checkpoint: malformed size %q", size)
	}
	n, err := strconv.ParseInt(size, 10, 64)
	if err != nil {
		return c, fmt.Errorf("checkpoint: size %q: %v", size, err)
	}
	root, err := base64.StdEncoding.DecodeString(lines[2])
	if err != nil || len(root) != tlog.HashSize || base64.StdEncoding.EncodeToString(root) != lines[2] {
		return c, fmt.Errorf("checkpoint: malformed root hash %q", lines[2])
	}
	c.tree.N = n
	copy(c.tree.Hash[:], root)
	for _, ext := range lines[3:] {
		if ext == "" {
			return c, errors.New("checkpoint: an empty extension line")
		}
	}
	c.extensions = lines[3:]
	return c, nil
}

// openCheckpoint gives the checkpoint body of raw: with verifiers, the text of the note that
// note.Open accepts; without, raw itself, or the text of a note whose signatures are not checked.
func openCheckpoint(raw []byte, verifiers note.Verifiers) (checkpoint, bool, error) {
	if verifiers != nil {
		n, err := note.Open(raw, verifiers)
		if err != nil {
			return checkpoint{}, false, fmt.Errorf("checkpoint signature: %v", err)
		}
		c, err := parseCheckpoint(n.Text)
		return c, true, err
	}
	text := string(raw)
	if i := strings.Index(text, "\n\n"); i >= 0 {
		text = text[:i+1]
	}
	c, err := parseCheckpoint(text)
	return c, false, err
}

// tileReader is a tlog.TileReader over the log's C2SP tiles. It keeps what it read (unverified: the
// tlog.TileHashReader above it authenticates the tiles on every read).
type tileReader struct {
	src   *source
	cache map[string][]byte
}

// c2spPath maps Go's tile path "tile/8/L/N[.p/W]" (L "data" for records) onto C2SP's
// "tile/L/N[.p/W]" ("entries" for the bundles).
func c2spPath(t tlog.Tile) string {
	p := strings.TrimPrefix(t.Path(), fmt.Sprintf("tile/%d/", tileHeight))
	if strings.HasPrefix(p, "data/") {
		p = "entries/" + strings.TrimPrefix(p, "data/")
	}
	return "tile/" + p
}

func (r *tileReader) Height() int { return tileHeight }

func (r *tileReader) ReadTiles(tiles []tlog.Tile) ([][]byte, error) {
	out := make([][]byte, len(tiles))
	for i, t := range tiles {
		p := c2spPath(t)
		data, ok := r.cache[p]
		if !ok {
			var err error
			if data, err = r.src.fetch(p); err != nil {
				return nil, fmt.Errorf("tile %s: %v", p, err)
			}
			r.cache[p] = data
		}
		if len(data) != t.W*tlog.HashSize {
			return nil, fmt.Errorf("tile %s: %d bytes, want %d", p, len(data), t.W*tlog.HashSize)
		}
		out[i] = data
	}
	return out, nil
}

func (r *tileReader) SaveTiles(tiles []tlog.Tile, data [][]byte) {}

// hashCache keeps the hashes an authenticating HashReader returned, so that proving every record
// fetches each stored hash once.
type hashCache struct {
	r tlog.HashReader
	m map[int64]tlog.Hash
}

func (c *hashCache) ReadHashes(indexes []int64) ([]tlog.Hash, error) {
	var missing []int64
	seen := map[int64]bool{}
	for _, x := range indexes {
		if _, ok := c.m[x]; !ok && !seen[x] {
			missing = append(missing, x)
			seen[x] = true
		}
	}
	if len(missing) > 0 {
		hashes, err := c.r.ReadHashes(missing)
		if err != nil {
			return nil, err
		}
		for i, x := range missing {
			c.m[x] = hashes[i]
		}
	}
	out := make([]tlog.Hash, len(indexes))
	for i, x := range indexes {
		out[i] = c.m[x]
	}
	return out, nil
}

// recorder is a HashReader that only notes which hashes a proof needs.
type recorder []int64

func (r *recorder) ReadHashes(indexes []int64) ([]tlog.Hash, error) {
	*r = append(*r, indexes...)
	return make([]tlog.Hash, len(indexes)), nil
}

// splitBundle parses an entry bundle of exactly width entries.
func splitBundle(data []byte, width int) ([][]byte, error) {
	entries := make([][]byte, 0, width)
	for len(data) > 0 {
		if len(data) < 2 {
			return nil, errors.New("a truncated length prefix")
		}
		n := int(data[0])<<8 | int(data[1])
		if len(data)-2 < n {
			return nil, fmt.Errorf("entry %d: %d bytes announced, %d left", len(entries), n, len(data)-2)
		}
		entries = append(entries, data[2:2+n])
		data = data[2+n:]
	}
	if len(entries) != width {
		return nil, fmt.Errorf("%d entries, want %d", len(entries), width)
	}
	return entries, nil
}

var emptyRoot = tlog.Hash(sha256.Sum256(nil))

// verifyEntries proves the inclusion of every entry of the tree, a bundle at a time: first the
// hashes all the bundle's proofs need are read through the authenticating reader in one call, then
// each proof is made from them and checked against the tree's root with the entry's record hash.
func verifyEntries(src *source, tree tlog.Tree, hr tlog.HashReader) (int64, error) {
	cache := &hashCache{r: hr, m: map[int64]tlog.Hash{}}
	bundles := int64(0)
	for k := int64(0); k*tileWidth < tree.N; k++ {
		width := tree.N - k*tileWidth
		if width > tileWidth {
			width = tileWidth
		}
		p := c2spPath(tlog.Tile{H: tileHeight, L: -1, N: k, W: int(width)})
		data, err := src.fetch(p)
		if err != nil {
			return bundles, fmt.Errorf("entry bundle %s: %v", p, err)
		}
		entries, err := splitBundle(data, int(width))
		if err != nil {
			return bundles, fmt.Errorf("entry bundle %s: %v", p, err)
		}
		var need recorder
		for i := range entries {
			if _, err := tlog.ProveRecord(tree.N, k*tileWidth+int64(i), &need); err != nil {
				return bundles, err
			}
		}
		if _, err := cache.ReadHashes(need); err != nil {
			return bundles, fmt.Errorf("tiles under entry bundle %s: %v", p, err)
		}
		for i, e := range entries {
			index := k*tileWidth + int64(i)
			proof, err := tlog.ProveRecord(tree.N, index, cache)
			if err != nil {
				return bundles, fmt.Errorf("entry %d: %v", index, err)
			}
			if err := tlog.CheckRecord(proof, tree.N, tree.Hash, index, tlog.RecordHash(e)); err != nil {
				return bundles, fmt.Errorf("entry %d (%s): not included in the tree: %v", index, p, err)
			}
		}
		bundles++
		if len(cache.m) > 1<<20 { // keep memory bounded on large logs
			cache.m = map[int64]tlog.Hash{}
		}
	}
	return bundles, nil
}

// treeHash is the RFC 6962 root of the tree of n records from the authenticating reader (tlog.TreeHash
// answers the zero hash for n = 0; the RFC's is SHA-256 of the empty string).
func treeHash(n int64, hr tlog.HashReader) (tlog.Hash, error) {
	if n == 0 {
		return emptyRoot, nil
	}
	return tlog.TreeHash(n, hr)
}

// verifyTileTree checks every full tile against the hash its parent tile holds for it, from the
// level below the top down to level 0, and returns how many it checked. The top level's tile and
// every partial tile are the tree hash's (tlog.TreeHash through TileHashReader authenticated them);
// by induction every full tile is then authenticated. A full tile's root is NodeHash of its two
// halves, the level 8L+7 nodes tlog.HashFromTile computes from it.
func verifyTileTree(tree tlog.Tree, tr *tileReader) (int, error) {
	levels := 0
	for n := tree.N; n > 0; n >>= tileHeight {
		levels++
	}
	checked := 0
	for level := levels - 2; level >= 0; level-- {
		full := tree.N >> uint(tileHeight*level) >> tileHeight
		above := tree.N >> uint(tileHeight*(level+1))
		for n := int64(0); n < full; n++ {
			child := tlog.Tile{H: tileHeight, L: level, N: n, W: tileWidth}
			pn := n >> tileHeight
			pw := above - pn*tileWidth
			if pw > tileWidth {
				pw = tileWidth
			}
			parent := tlog.Tile{H: tileHeight, L: level + 1, N: pn, W: int(pw)}
			data, err := tr.ReadTiles([]tlog.Tile{child, parent})
			if err != nil {
				return checked, err
			}
			below := tileHeight*level + tileHeight - 1
			left, err1 := tlog.HashFromTile(child, data[0], tlog.StoredHashIndex(below, 2*n))
			right, err2 := tlog.HashFromTile(child, data[0], tlog.StoredHashIndex(below, 2*n+1))
			want, err3 := tlog.HashFromTile(parent, data[1], tlog.StoredHashIndex(tileHeight*(level+1), n))
			for _, err := range []error{err1, err2, err3} {
				if err != nil {
					return checked, err
				}
			}
			if tlog.NodeHash(left, right) != want {
				return checked, fmt.Errorf("tile %s does not hash to its entry in tile %s", c2spPath(child),
					c2spPath(parent))
			}
			checked++
		}
	}
	return checked, nil
}

// verifyConsistency checks that the tree old is a prefix of the tree cur, then that the log still
// serves old's own tiles.
func verifyConsistency(old, cur tlog.Tree, hr tlog.HashReader, tr tlog.TileReader) error {
	switch {
	case old.N > cur.N:
		return fmt.Errorf("the older checkpoint's size %d exceeds the checkpoint's %d", old.N, cur.N)
	case old.N == 0:
		if old.Hash != emptyRoot {
			return errors.New("the older checkpoint of size 0 does not have the empty tree's root")
		}
	case old.N == cur.N:
		if old.Hash != cur.Hash {
			return fmt.Errorf("two checkpoints of size %d with different roots", old.N)
		}
	default:
		proof, err := tlog.ProveTree(cur.N, old.N, hr)
		if err != nil {
			return fmt.Errorf("consistency proof %d -> %d: %v", old.N, cur.N, err)
		}
		if err := tlog.CheckTree(proof, cur.N, cur.Hash, old.N, old.Hash); err != nil {
			return fmt.Errorf("the older checkpoint (size %d) is not consistent with the checkpoint (size %d): %v",
				old.N, cur.N, err)
		}
	}
	h, err := treeHash(old.N, tlog.TileHashReader(old, tr))
	if err != nil {
		return fmt.Errorf("the tiles of the older checkpoint's tree (size %d): %v", old.N, err)
	}
	if h != old.Hash {
		return fmt.Errorf("the tiles of the older checkpoint's tree (size %d) give root %v", old.N, h)
	}
	return nil
}

func readCheckpointArg(src *source, arg string) ([]byte, error) {
	if strings.HasPrefix(arg, "http://") || strings.HasPrefix(arg, "https://") {
		return fetchURL(src.client, arg)
	}
	return os.ReadFile(arg)
}

// verifyLog verifies the log at src against its checkpoint (signed by verifiers when not nil, of
// origin when not empty) and, when oldRaw is not nil, its consistency with that older checkpoint.
// It returns the summary line and the checkpoint's bytes as fetched.
func verifyLog(src *source, verifiers note.Verifiers, origin string, oldRaw []byte) (string, []byte, error) {
	raw, err := src.fetch("checkpoint")
	if err != nil {
		return "", nil, fmt.Errorf("checkpoint: %v", err)
	}
	cp, signed, err := openCheckpoint(raw, verifiers)
	if err != nil {
		return "", nil, err
	}
	if origin != "" && cp.origin != origin {
		return "", nil, fmt.Errorf("checkpoint: origin %q, want %q", cp.origin, origin)
	}

	tr := &tileReader{src: src, cache: map[string][]byte{}}
	hr := tlog.TileHashReader(cp.tree, tr)
	root, err := treeHash(cp.tree.N, hr)
	if err != nil {
		return "", nil, fmt.Errorf("tree hash of size %d: %v", cp.tree.N, err)
	}
	if root != cp.tree.Hash {
		return "", nil, fmt.Errorf("the tiles give root %v, the checkpoint says %v", root, cp.tree.Hash)
	}
	checked, err := verifyTileTree(cp.tree, tr)
	if err != nil {
		return "", nil, err
	}
	bundles, err := verifyEntries(src, cp.tree, hr)
	if err != nil {
		return "", nil, err
	}

	consistent := ""
	if oldRaw != nil {
		old, _, err := openCheckpoint(oldRaw, verifiers)
		if err != nil {
			return "", nil, fmt.Errorf("older checkpoint: %v", err)
		}
		if old.origin != cp.origin {
			return "", nil, fmt.Errorf("older checkpoint: origin %q, the checkpoint's is %q", old.origin, cp.origin)
		}
		if err := verifyConsistency(old.tree, cp.tree, hr, tr); err != nil {
			return "", nil, err
		}
		consistent = fmt.Sprintf(", consistent with size %d", old.tree.N)
	}
	sig := "signature verified"
	if !signed {
		sig = "signatures not checked (no -key)"
	}
	return fmt.Sprintf("verify_tiles: OK %s size %d root %s: %s, tree hash, %d full tiles under their parents, "+
		"%d entries included (%d bundles, %d tiles)%s", cp.origin, cp.tree.N,
		base64.StdEncoding.EncodeToString(cp.tree.Hash[:]), sig, checked, cp.tree.N, bundles, len(tr.cache),
		consistent), raw, nil
}

// listedLog is one log of a daemon's GET /log/.
type listedLog struct {
	WriterID string  `json:"writer_id"`
	Origin   string  `json:"origin"`
	Key      *string `json:"key"`
	Prefix   string  `json:"prefix"`
	Size     int64   `json:"size"`
}

// verifyListed verifies every log a daemon lists (see -list above), one summary line each.
func verifyListed(base, saveDir, oldDir string) (string, error) {
	client := &http.Client{Timeout: 60 * time.Second}
	base = strings.TrimRight(base, "/")
	data, err := fetchURL(client, base+"/log/")
	if err != nil {
		return "", fmt.Errorf("the list of logs: %v", err)
	}
	var list struct {
		Logs []listedLog `json:"logs"`
	}
	if err := json.Unmarshal(data, &list); err != nil {
		return "", fmt.Errorf("the list of logs: %v", err)
	}
	if len(list.Logs) == 0 {
		return "", errors.New("the daemon lists no log")
	}
	var lines []string
	for _, l := range list.Logs {
		if l.Key == nil {
			return "", fmt.Errorf("log %q: listed without a note verifier key", l.WriterID)
		}
		if l.Prefix != "/log/"+l.WriterID+"/" || strings.ContainsAny(l.WriterID, "/ ") {
			return "", fmt.Errorf("log %q: prefix %q", l.WriterID, l.Prefix)
		}
		v, err := note.NewVerifier(*l.Key)
		if err != nil {
			return "", fmt.Errorf("log %q: key %q: %v", l.WriterID, *l.Key, err)
		}
		if v.Name() != l.Origin {
			return "", fmt.Errorf("log %q: key named %q, origin %q", l.WriterID, v.Name(), l.Origin)
		}
		var oldRaw []byte
		if oldDir != "" {
			oldRaw, err = os.ReadFile(filepath.Join(oldDir, l.WriterID+".checkpoint"))
			if err != nil && !errors.Is(err, os.ErrNotExist) {
				return "", err
			}
		}
		src := &source{base: base + strings.TrimRight(l.Prefix, "/"), isURL: true, client: client}
		summary, raw, err := verifyLog(src, note.VerifierList(v), l.Origin, oldRaw)
		if err != nil {
			return "", fmt.Errorf("log %q: %v", l.WriterID, err)
		}
		if saveDir != "" {
			if err := os.WriteFile(filepath.Join(saveDir, l.WriterID+".checkpoint"), raw, 0o644); err != nil {
				return "", err
			}
		}
		lines = append(lines, summary)
	}
	return strings.Join(lines, "\n"), nil
}

func run() (string, error) {
	key := flag.String("key", "", "note verifier key of the log (name+hash+keydata); without it signatures are not checked")
	oldPath := flag.String("old", "", "an older checkpoint of the same log (path or URL): check consistency")
	origin := flag.String("origin", "", "the origin line the checkpoint must have")
	token := flag.String("token", "", "send Authorization: Bearer TOKEN with every request")
	list := flag.Bool("list", false, "BASE is a pgcld daemon: verify every log its GET /log/ lists")
	saveDir := flag.String("save", "", "with -list: keep each verified checkpoint as DIR/<writer_id>.checkpoint")
	oldDir := flag.String("old-dir", "", "with -list: check consistency with DIR/<writer_id>.checkpoint")
	flag.Usage = func() {
		fmt.Fprintf(flag.CommandLine.Output(), "usage: verify_tiles [-key VKEY] [-old CHECKPOINT] [-origin ORIGIN] [-token TOKEN] BASE\n"+
			"       verify_tiles -list [-token TOKEN] [-save DIR] [-old-dir DIR] URL\n")
		flag.PrintDefaults()
	}
	flag.Parse()
	if flag.NArg() != 1 {
		flag.Usage()
		os.Exit(2)
	}
	bearer = *token
	if *list {
		return verifyListed(flag.Arg(0), *saveDir, *oldDir)
	}
	src := newSource(flag.Arg(0))
	var verifiers note.Verifiers
	if *key != "" {
		v, err := note.NewVerifier(*key)
		if err != nil {
			return "", fmt.Errorf("-key: %v", err)
		}
		verifiers = note.VerifierList(v)
	}
	var oldRaw []byte
	if *oldPath != "" {
		raw, err := readCheckpointArg(src, *oldPath)
		if err != nil {
			return "", fmt.Errorf("older checkpoint: %v", err)
		}
		oldRaw = raw
	}
	summary, _, err := verifyLog(src, verifiers, *origin, oldRaw)
	return summary, err
}

func main() {
	summary, err := run()
	if err != nil {
		fmt.Fprintf(os.Stderr, "verify_tiles: FAIL: %v\n", err)
		os.Exit(1)
	}
	fmt.Println(summary)
}
