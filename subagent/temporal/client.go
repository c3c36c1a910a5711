package temporal

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"

	"go.temporal.io/sdk/client"
	sdklog "go.temporal.io/sdk/log"
)

// dial returns a client of the cluster c names; a lazy one connects at its
// first call.
func dial(c Config, lazy bool) (client.Client, error) {
	opts := client.Options{HostPort: c.HostPort, Namespace: c.Namespace, Logger: sdklog.NewStructuredLogger(c.Log)}
	tlsConfig, err := c.tlsConfig()
	if err != nil {
		return nil, err
	}
	opts.ConnectionOptions.TLS = tlsConfig
	if c.APIKeyEnv != "" {
		opts.Credentials = client.NewAPIKeyDynamicCredentials(func(context.Context) (string, error) {
			if c.Getenv != nil {
				if key := c.Getenv(c.APIKeyEnv); key != "" {
					return key, nil
				}
			}
			return "", fmt.Errorf("the Temporal API key variable $%s (apiKeyEnv) is empty", c.APIKeyEnv)
		})
	}
	if lazy {
		return client.NewLazyClient(opts)
	}
	return client.Dial(opts)
}

// tlsConfig is the TLS configuration c asks for, nil for plain TCP.
func (c Config) tlsConfig() (*tls.Config, error) {
	if !c.TLS && c.APIKeyEnv == "" && c.CAFile == "" && c.CertFile == "" {
		return nil, nil
	}
	conf := &tls.Config{ServerName: c.ServerName, MinVersion: tls.VersionTLS12}
	if c.CAFile != "" {
		pem, err := os.ReadFile(c.CAFile)
		if err != nil {
			return nil, err
		}
		conf.RootCAs = x509.NewCertPool()
		if !conf.RootCAs.AppendCertsFromPEM(pem) {
			return nil, errors.New(c.CAFile + ": no PEM certificate in it")
		}
	}
	if c.CertFile != "" {
		cert, err := tls.LoadX509KeyPair(c.CertFile, c.KeyFile)
		if err != nil {
			return nil, err
		}
		conf.Certificates = []tls.Certificate{cert}
	}
	return conf, nil
}
