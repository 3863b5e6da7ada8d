package egress

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
)

// maxHello bounds what is read before a connection says where it goes: a
// TLS record (a ClientHello fits one) or an HTTP request's head.
const maxHello = 16<<10 + 5

// errNoName says the connection's first bytes name no server.
var errNoName = errors.New("the connection names no server: neither a TLS ClientHello with a server name nor an HTTP request with a Host")

// sniff reads the start of a connection — a TLS ClientHello, or an HTTP
// request's head — and returns the server it names, with kind "tls" or
// "http" and the bytes it read, which the server must still receive.
func sniff(r io.Reader) (name, kind string, head []byte, err error) {
	buf := make([]byte, 0, 4096)
	var tmp [4096]byte
	for len(buf) < maxHello {
		n, err := r.Read(tmp[:min(len(tmp), maxHello-len(buf))])
		buf = append(buf, tmp[:n]...)
		if len(buf) > 0 && buf[0] == 0x16 {
			// TLS: one record holds the ClientHello.
			if len(buf) >= 5 {
				if need := 5 + int(binary.BigEndian.Uint16(buf[3:5])); len(buf) >= need {
					name, err := serverName(buf[5:need])
					return name, "tls", buf, err
				}
			}
		} else if i := bytes.Index(buf, []byte("\r\n\r\n")); i >= 0 {
			name, err := httpHost(buf[:i+4])
			return name, "http", buf, err
		}
		if err != nil {
			if err == io.EOF {
				err = errNoName
			}
			return "", "", buf, err
		}
	}
	return "", "", buf, errNoName
}

// serverName returns the server_name of the TLS handshake message that
// starts msg, a ClientHello.
func serverName(msg []byte) (string, error) {
	bad := fmt.Errorf("%w (a TLS record that is not a ClientHello one can read)", errNoName)
	r := reader(msg)
	typ, ok := r.u8()
	if !ok || typ != 1 {
		return "", bad
	}
	n, ok := r.u24()
	if !ok {
		return "", bad
	}
	body, ok := r.bytes(n)
	if !ok {
		return "", fmt.Errorf("%w (the ClientHello spans more than one record)", errNoName)
	}
	h := reader(body)
	if _, ok := h.bytes(2 + 32); !ok { // version, random
		return "", bad
	}
	for _, lenBytes := range []int{1, 2, 1} { // session id, cipher suites, compression methods
		if _, ok := h.vector(lenBytes); !ok {
			return "", bad
		}
	}
	exts, ok := h.vector(2)
	if !ok {
		return "", fmt.Errorf("%w (a ClientHello without extensions)", errNoName)
	}
	e := reader(exts)
	for len(e) > 0 {
		typ, ok1 := e.u16()
		data, ok2 := e.vector(2)
		if !ok1 || !ok2 {
			return "", bad
		}
		if typ != 0 { // server_name
			continue
		}
		list := reader(data)
		names, ok := list.vector(2)
		if !ok {
			return "", bad
		}
		nl := reader(names)
		for len(nl) > 0 {
			kind, ok1 := nl.u8()
			host, ok2 := nl.vector(2)
			if !ok1 || !ok2 {
				return "", bad
			}
			if kind == 0 {
				return strings.TrimSuffix(strings.ToLower(string(host)), "."), nil
			}
		}
	}
	return "", fmt.Errorf("%w (a ClientHello without a server name)", errNoName)
}

// httpHost returns the host an HTTP request's head names, without a port.
func httpHost(head []byte) (string, error) {
	req, err := http.ReadRequest(bufio.NewReader(bytes.NewReader(head)))
	if err != nil {
		return "", fmt.Errorf("%w (%v)", errNoName, err)
	}
	if req.Method == http.MethodConnect {
		return "", fmt.Errorf("%w (CONNECT: connect to the server itself; no proxy is needed)", errNoName)
	}
	host := req.Host
	if host == "" {
		return "", fmt.Errorf("%w (an HTTP request without a Host)", errNoName)
	}
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	return strings.TrimSuffix(strings.ToLower(host), "."), nil
}

// reader reads a TLS message's fields.
type reader []byte

func (r *reader) bytes(n int) ([]byte, bool) {
	if n < 0 || len(*r) < n {
		return nil, false
	}
	b := (*r)[:n]
	*r = (*r)[n:]
	return b, true
}

func (r *reader) u8() (int, bool) {
	b, ok := r.bytes(1)
	if !ok {
		return 0, false
	}
	return int(b[0]), true
}

func (r *reader) u16() (int, bool) {
	b, ok := r.bytes(2)
	if !ok {
		return 0, false
	}
	return int(binary.BigEndian.Uint16(b)), true
}

func (r *reader) u24() (int, bool) {
	b, ok := r.bytes(3)
	if !ok {
		return 0, false
	}
	return int(b[0])<<16 | int(b[1])<<8 | int(b[2]), true
}

// vector reads a field that its length, in lenBytes bytes, precedes.
func (r *reader) vector(lenBytes int) ([]byte, bool) {
	var n int
	var ok bool
	switch lenBytes {
	case 1:
		n, ok = r.u8()
	case 2:
		n, ok = r.u16()
	}
	if !ok {
		return nil, false
	}
	return r.bytes(n)
}
