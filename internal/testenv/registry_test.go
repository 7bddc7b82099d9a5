package testenv_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/walrelay/walrelay/internal/testenv"
)

const (
	regA   = `{"type":"record","name":"R","fields":[{"name":"a","type":"int"}]}`
	regAB  = `{"type":"record","name":"R","fields":[{"name":"a","type":"int"},{"name":"b","type":"string"}]}`
	regABd = `{"type":"record","name":"R","fields":[{"name":"a","type":"int"},{"name":"b","type":"string","default":"x"}]}`
	regNoA = `{"type":"record","name":"R","fields":[]}`
)

// post registers schema under subject over HTTP and returns the status and
// the decoded answer.
func post(t *testing.T, r *testenv.SchemaRegistry, subject, schema string, header ...string) (int, map[string]any) {
	t.Helper()
	body, _ := json.Marshal(map[string]string{"schema": schema})
	req, _ := http.NewRequest(http.MethodPost, r.URL()+"/subjects/"+subject+"/versions", strings.NewReader(string(body)))
	req.Header.Set("Content-Type", "application/vnd.schemaregistry.v1+json")
	if len(header) == 2 {
		req.Header.Set(header[0], header[1])
	}
	return do(t, req)
}

func do(t *testing.T, req *http.Request) (int, map[string]any) {
	t.Helper()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var m map[string]any
	_ = json.Unmarshal(b, &m)
	return resp.StatusCode, m
}

func TestRegistryCompatibility(t *testing.T) {
	for _, tc := range []struct {
		name         string
		level        string
		first, next  string
		wantStatus   int
		wantMsgInErr string
	}{
		{"BACKWARD refuses a new field without default", "BACKWARD", regA, regAB, 409, "incompatible with an earlier schema"},
		{"BACKWARD takes a new field with a default", "BACKWARD", regA, regABd, 200, ""},
		{"BACKWARD takes a dropped field", "BACKWARD", regA, regNoA, 200, ""},
		{"FORWARD refuses a dropped field without default", "FORWARD", regA, regNoA, 409, "incompatible"},
		{"FORWARD takes a new field without default", "FORWARD", regA, regAB, 200, ""},
		{"FULL refuses a new field without default", "FULL", regA, regAB, 409, "incompatible"},
		{"FULL takes a new field with a default", "FULL", regA, regABd, 200, ""},
		{"NONE takes anything", "NONE", regA, `"string"`, 200, ""},
		{"BACKWARD refuses another type", "BACKWARD", regA, `"string"`, 409, "incompatible"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := testenv.Registry(t)
			r.SetCompat("s", tc.level)
			if status, m := post(t, r, "s", tc.first); status != 200 || m["id"] != 1.0 {
				t.Fatalf("first registration: %d %v", status, m)
			}
			status, m := post(t, r, "s", tc.next)
			if status != tc.wantStatus {
				t.Fatalf("second registration: %d %v; want %d", status, m, tc.wantStatus)
			}
			if tc.wantStatus == 409 && (m["error_code"] != 409.0 || !strings.Contains(m["message"].(string), tc.wantMsgInErr)) {
				t.Errorf("409 body %v", m)
			}
		})
	}
	t.Run("BACKWARD_TRANSITIVE checks every version", func(t *testing.T) {
		r := testenv.Registry(t)
		r.SetCompat("s", "NONE")
		post(t, r, "s", regAB)
		post(t, r, "s", regA)
		r.SetCompat("s", "BACKWARD")
		if status, m := post(t, r, "s", regA[:len(regA)-2]+`,{"name":"c","type":"int","default":0}]}`); status != 200 {
			t.Errorf("BACKWARD against the latest only: %d %v", status, m)
		}
		r.SetCompat("s", "BACKWARD_TRANSITIVE")
		if status, m := post(t, r, "s", regA[:len(regA)-2]+`,{"name":"d","type":"int"}]}`); status != 409 {
			t.Errorf("BACKWARD_TRANSITIVE: %d %v; want 409", status, m)
		}
	})
	t.Run("the same schema again returns its id", func(t *testing.T) {
		r := testenv.Registry(t)
		post(t, r, "s", regA)
		if status, m := post(t, r, "s", regA); status != 200 || m["id"] != 1.0 {
			t.Errorf("%d %v", status, m)
		}
	})
	t.Run("error code 40901", func(t *testing.T) {
		r := testenv.Registry(t, testenv.RegistryIncompatibleCode(40901))
		post(t, r, "s", regA)
		if status, m := post(t, r, "s", regAB); status != 409 || m["error_code"] != 40901.0 {
			t.Errorf("%d %v", status, m)
		}
	})
	t.Run("422 for a schema that does not parse", func(t *testing.T) {
		r := testenv.Registry(t)
		if status, m := post(t, r, "s", `{"type":"record","name":"R","fields":[{"name":"a","type":"nope"}]}`); status != 422 || m["error_code"] != 42201.0 {
			t.Errorf("%d %v", status, m)
		}
	})
}

func TestRegistryAuthFaultsAndLog(t *testing.T) {
	r := testenv.Registry(t, testenv.RegistryBasicAuth("u", "p"))
	if status, m := post(t, r, "s", regA); status != 401 || m["error_code"] != 401.0 {
		t.Errorf("without credentials: %d %v", status, m)
	}
	good := []string{"Authorization", "Basic dTpw"} // u:p
	if status, m := post(t, r, "s", regA, good...); status != 200 {
		t.Fatalf("with credentials: %d %v", status, m)
	}
	// GET /schemas/ids/{id}: what decoders use.
	req, _ := http.NewRequest(http.MethodGet, r.URL()+"/schemas/ids/1", nil)
	req.Header.Set(good[0], good[1])
	if status, m := do(t, req); status != 200 || m["schema"] != regA {
		t.Errorf("GET /schemas/ids/1: %d %v", status, m)
	}

	r.Refuse("s", 422, 42205, "Subject s is in read-only mode")
	if status, m := post(t, r, "s", regA, good...); status != 422 || m["message"] != "Subject s is in read-only mode" {
		t.Errorf("refused: %d %v", status, m)
	}
	r.Refuse("s", 0, 0, "")

	r.Unavailable()
	if status, _ := post(t, r, "s", regA, good...); status != 503 {
		t.Errorf("unavailable: %d", status)
	}
	r.Up()

	r.Down()
	http.DefaultClient.CloseIdleConnections() // a kept-alive connection would see EOF, not a refusal
	body := strings.NewReader(`{"schema":"\"string\""}`)
	if _, err := http.Post(r.URL()+"/subjects/s/versions", "application/json", body); !errors.Is(err, syscall.ECONNREFUSED) {
		t.Errorf("down: %v; want connection refused", err)
	}
	r.Up()
	if status, _ := post(t, r, "s", regA, good...); status != 200 {
		t.Errorf("up again: %d", status)
	}

	r.Slow(100 * time.Millisecond)
	start := time.Now()
	post(t, r, "s", regA, good...)
	if time.Since(start) < 100*time.Millisecond {
		t.Error("Slow did not delay the answer")
	}
	r.Slow(0)

	if n := r.Count("POST", "/subjects/s/versions"); n != 6 {
		t.Errorf("Count = %d, want 6 (connections refused are not requests)", n)
	}
	var statuses []int
	for _, q := range r.Requests() {
		statuses = append(statuses, q.Status)
	}
	if got := fmt.Sprint(statuses); got != "[401 200 200 422 503 200 200]" {
		t.Errorf("statuses %v", got)
	}
}
