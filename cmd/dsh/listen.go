package main

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"github.com/dsh-go/dsh/a2aserver"
	"github.com/dsh-go/dsh/config"
	"github.com/dsh-go/dsh/internal/bearer"
	"github.com/dsh-go/dsh/mcpserver"
)

// httpServer names one of dsh's HTTP servers for listener.
type httpServer struct {
	command    string // as the user types it: "dsh mcp"
	tokenFile  string // the default token file's name in $DSH_HOME
	anyAddress bool   // the command has --any-address
	require    func(token string, next http.Handler) http.Handler
}

func mcpHTTP() httpServer {
	return httpServer{command: "dsh mcp", tokenFile: "mcp-token", require: mcpserver.RequireToken}
}

func a2aHTTP() httpServer {
	return httpServer{command: "dsh a2a", tokenFile: "a2a-token", anyAddress: true, require: a2aserver.RequireToken}
}

// listener listens where --listen says: on a TCP address, whose clients
// must send the bearer token of tokenFile (default $DSH_HOME/ and the
// server's file name), loopback only unless anyAddr; or on a Unix socket
// that only this user can open (unix:PATH), which needs no token. auth
// wraps the server's handler.
func (c *cli) listener(srv httpServer, listen, tokenFile string, anyAddr bool) (ln net.Listener, auth func(http.Handler) http.Handler, err error) {
	if path, ok := strings.CutPrefix(listen, "unix:"); ok {
		if tokenFile != "" {
			return nil, nil, errors.New("--token-file is for --listen on a TCP address: a unix: socket is open to its owner only and needs no token")
		}
		if path == "" {
			return nil, nil, errors.New("--listen unix: needs a socket path (unix:PATH)")
		}
		ln, err := listenUnix(path)
		if err != nil {
			return nil, nil, fmt.Errorf("--listen %s: %w", listen, err)
		}
		return ln, func(h http.Handler) http.Handler { return h }, nil
	}
	host, _, err := net.SplitHostPort(listen)
	if err != nil {
		return nil, nil, fmt.Errorf("--listen %s: %w", listen, err)
	}
	if ip := net.ParseIP(host); !anyAddr && host != "localhost" && (ip == nil || !ip.IsLoopback()) {
		unless := ""
		if srv.anyAddress {
			unless = " unless --any-address"
		}
		return nil, nil, fmt.Errorf("--listen %s: %s serves loopback addresses only (127.0.0.1, ::1, localhost) or unix:PATH%s: its children can run commands",
			listen, srv.command, unless)
	}
	if tokenFile == "" {
		home, err := config.Home(c.getenv)
		if err != nil {
			return nil, nil, err
		}
		tokenFile = filepath.Join(home, srv.tokenFile)
	}
	token, created, err := bearer.LoadToken(tokenFile)
	if err != nil {
		return nil, nil, fmt.Errorf("%s --listen: %w", srv.command, err)
	}
	if ln, err = net.Listen("tcp", listen); err != nil {
		return nil, nil, err
	}
	if created {
		fmt.Fprintf(c.stderr, "%s: generated a bearer token (shown this once, kept in %s): %s\n", srv.command, tokenFile, token)
	}
	fmt.Fprintf(c.stderr, "%s: clients send the header \"Authorization: Bearer <token>\" with the token in %s\n", srv.command, tokenFile)
	return ln, func(h http.Handler) http.Handler { return srv.require(token, h) }, nil
}

// listenUnix listens on a Unix socket at path with mode 0600, so that only
// this user can connect. The socket is made in a private directory (0700)
// beside path, restricted there, and renamed into place, so that no other
// user can connect between its creation and its chmod. A stale socket at
// path is replaced; a socket someone serves, or any other file, is refused.
// Closing the listener removes the socket.
func listenUnix(path string) (net.Listener, error) {
	if fi, err := os.Lstat(path); err == nil {
		if fi.Mode().Type() != os.ModeSocket {
			return nil, fmt.Errorf("%s exists and is not a socket", path)
		}
		if conn, err := net.Dial("unix", path); err == nil {
			conn.Close()
			return nil, fmt.Errorf("%s is served by another process", path)
		}
	}
	dir, err := os.MkdirTemp(filepath.Dir(path), ".dsh-mcp-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	tmp := filepath.Join(dir, "s")
	ln, err := net.Listen("unix", tmp)
	if err != nil {
		return nil, err
	}
	ul := ln.(*net.UnixListener)
	ul.SetUnlinkOnClose(false)
	if err := os.Chmod(tmp, 0o600); err != nil {
		ln.Close()
		return nil, err
	}
	if err := os.Rename(tmp, path); err != nil {
		ln.Close()
		return nil, err
	}
	return &unixListener{UnixListener: ul, path: path}, nil
}

// unixListener removes its socket file when closed.
type unixListener struct {
	*net.UnixListener
	path string
	once sync.Once
}

// Addr is the socket's path (the listener was bound to a temporary one).
func (l *unixListener) Addr() net.Addr { return &net.UnixAddr{Name: l.path, Net: "unix"} }

func (l *unixListener) Close() error {
	err := l.UnixListener.Close()
	l.once.Do(func() { os.Remove(l.path) })
	return err
}
