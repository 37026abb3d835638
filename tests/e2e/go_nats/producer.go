// producer.go: a Go producer enqueuing through JetStream with nothing but the standard library
// (go run producer.go; Go 1.19+). A JetStream publish is a core NATS publish with a reply
// subject: the stream's ack ({"stream", "seq", "duplicate"?}) comes back on it. Each job is
// published twice under one Nats-Msg-Id, as a producer retrying a publish whose ack it lost
// would: the stream drops the second copy, and the api enqueues each job once.
//
// Env: NATS_URL (nats://host:port), UJOBS_NATS_PREFIX, UJOBS_TOKEN, JOBS (how many).
// Prints one JSON line per publish: {"msgId", "seq", "duplicate"}.
package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"
)

type pubAck struct {
	Stream    string `json:"stream"`
	Seq       uint64 `json:"seq"`
	Duplicate bool   `json:"duplicate"`
	Error     *struct {
		Description string `json:"description"`
	} `json:"error"`
}

func must(err error) {
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

// readMsg reads protocol lines until a message arrives on the inbox, answering PINGs.
func readMsg(r *bufio.Reader, w *bufio.Writer) []byte {
	for {
		line, err := r.ReadString('\n')
		must(err)
		line = strings.TrimRight(line, "\r\n")
		fields := strings.Fields(line)
		switch {
		case line == "PING":
			_, err = w.WriteString("PONG\r\n")
			must(err)
			must(w.Flush())
		case strings.HasPrefix(line, "-ERR"):
			must(fmt.Errorf("nats: %s", line))
		case len(fields) > 0 && (fields[0] == "MSG" || fields[0] == "HMSG"):
			size, err := strconv.Atoi(fields[len(fields)-1])
			must(err)
			body := make([]byte, size+2)
			_, err = io.ReadFull(r, body)
			must(err)
			if fields[0] == "HMSG" { // a status (503: no stream captures the subject)
				hdr, _ := strconv.Atoi(fields[len(fields)-2])
				must(fmt.Errorf("nats: %q", strings.TrimSpace(string(body[:hdr]))))
			}
			return body[:size]
		}
	}
}

func main() {
	server, err := url.Parse(os.Getenv("NATS_URL"))
	must(err)
	prefix, token := os.Getenv("UJOBS_NATS_PREFIX"), os.Getenv("UJOBS_TOKEN")
	jobs, err := strconv.Atoi(os.Getenv("JOBS"))
	must(err)
	conn, err := net.DialTimeout("tcp", server.Host, 5*time.Second)
	must(err)
	defer conn.Close()
	must(conn.SetDeadline(time.Now().Add(60 * time.Second)))
	r, w := bufio.NewReader(conn), bufio.NewWriter(conn)
	_, err = r.ReadString('\n') // INFO {...}
	must(err)
	_, err = w.WriteString(`CONNECT {"verbose":false,"headers":true,"no_responders":true,"protocol":1}` +
		"\r\nSUB _INBOX.goproducer 1\r\n")
	must(err)
	subject := prefix + ".js.enqueue.onboard_org"
	for i := 0; i < jobs; i++ {
		payload, err := json.Marshal(map[string]any{"input": map[string]string{"org_id": fmt.Sprintf("org-%d", i)}})
		must(err)
		msgID := fmt.Sprintf("go-%d", i)
		headers := "NATS/1.0\r\nAuthorization: Bearer " + token + "\r\nNats-Msg-Id: " + msgID + "\r\n\r\n"
		for attempt := 0; attempt < 2; attempt++ {
			_, err = fmt.Fprintf(w, "HPUB %s _INBOX.goproducer %d %d\r\n%s%s\r\n",
				subject, len(headers), len(headers)+len(payload), headers, payload)
			must(err)
			must(w.Flush())
			var ack pubAck
			must(json.Unmarshal(readMsg(r, w), &ack))
			if ack.Error != nil {
				must(fmt.Errorf("jetstream: %s", ack.Error.Description))
			}
			line, err := json.Marshal(map[string]any{"msgId": msgID, "seq": ack.Seq, "duplicate": ack.Duplicate})
			must(err)
			fmt.Println(string(line))
		}
	}
}
