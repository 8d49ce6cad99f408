package console

import (
	"context"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// TestLoginInBrowser drives headless Chromium through the login of a sluiced whose listener
// requires SASL: the console sends the browser to its login form, a wrong password is refused
// on the page, admin logs in, creates a topic with the form, and logging out returns to the
// login form; no page logs a console error. The login page's screenshot goes with the others.
func TestLoginInBrowser(t *testing.T) {
	if testing.Short() {
		t.Skip("starts sluiced and Chromium")
	}
	chromium, err := exec.LookPath("chromium")
	if err != nil {
		t.Skip("chromium is not installed: apt-get install -y chromium (.ci/run installs it)")
	}
	outDir := os.Getenv("SLUICE_TEST_OUT")
	if outDir == "" {
		outDir = t.ArtifactDir()
	} else if err := os.MkdirAll(outDir, 0o755); err != nil {
		t.Fatal(err)
	}
	users := filepath.Join(t.TempDir(), "users")
	if err := os.WriteFile(users, []byte("admin:admin-secret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	d := startSluiced(t, "--require-sasl", "--sasl-plain-users", users, "--super-users", "User:admin", "--ui-writes")
	ui := "http://" + d.http + "/ui"
	for deadline := time.Now().Add(30 * time.Second); ; { // ready: the console is mounted
		resp, err := http.Get("http://" + d.http + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("sluiced never became ready\n%s", d.logTail(20))
		}
		time.Sleep(20 * time.Millisecond) // /readyz has no change signal
	}

	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	allocator, cancelAllocator := chromedp.NewExecAllocator(ctx, append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chromium), chromedp.NoSandbox, chromedp.DisableGPU,
		chromedp.Flag("disable-quic", true), chromedp.Flag("disable-component-update", true),
		chromedp.UserDataDir(t.TempDir()), chromedp.WindowSize(1280, 700))...)
	defer cancelAllocator()
	browser, cancelBrowser := chromedp.NewContext(allocator)
	defer cancelBrowser()
	if err := chromedp.Do(browser); err != nil {
		t.Fatalf("start chromium: %v", err)
	}
	var consoleMu sync.Mutex
	var consoleErrors []string
	go func() {
		for m, err := range chromedp.Console(browser) {
			if err != nil {
				return
			}
			// The refused login answers 401, which Chromium logs as a failed resource load.
			if (m.IsException() || m.Type == "error") && !strings.Contains(m.String(), "status of 401 (Unauthorized)") {
				consoleMu.Lock()
				consoleErrors = append(consoleErrors, m.String())
				consoleMu.Unlock()
			}
		}
	}()
	do := func(what string, steps ...chromedp.Action[chromedp.Void]) {
		t.Helper()
		if err := chromedp.Do(browser, steps...); err != nil {
			html, _ := chromedp.Run(browser, chromedp.OuterHTML(chromedp.CSS("body")))
			t.Fatalf("%s: %v\npage:\n%s\nsluiced log tail:\n%s", what, err, html, d.logTail(20))
		}
	}
	text := func(selector string) string {
		t.Helper()
		got, err := chromedp.Run(browser, chromedp.Text(chromedp.CSS(selector)))
		if err != nil {
			t.Fatalf("text of %s: %v", selector, err)
		}
		return got
	}
	logIn := func(password string, then string) {
		t.Helper()
		do("log in with "+password,
			chromedp.SetValue(chromedp.CSS(`#login input[name=user]`), "admin"),
			chromedp.SetValue(chromedp.CSS(`#login input[name=password]`), password),
			chromedp.Submit(chromedp.CSS(`#login`)),
			chromedp.WaitVisible(chromedp.CSS(then)))
	}

	do("open the topics: sent to the login form", chromedp.Navigate(ui+"/topics"), chromedp.WaitVisible(chromedp.CSS("#login")))
	png, err := chromedp.Run(browser, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(outDir, "login.png"), png, 0o644); err != nil {
		t.Fatal(err)
	}
	logIn("wrong", "#error")
	if got := text("#error"); !strings.Contains(got, "Wrong user name or password") {
		t.Errorf("refused login says %q", got)
	}
	logIn("admin-secret", "#topics")
	if got := text("#user"); got != "admin" {
		t.Errorf("logged in as %q", got)
	}
	do("create a topic as admin",
		chromedp.SetValue(chromedp.CSS(`#create-topic input[name=name]`), "audited"),
		chromedp.Submit(chromedp.CSS(`#create-topic`)),
		chromedp.WaitVisible(chromedp.CSS("#partitions")))
	do("log out", chromedp.Submit(chromedp.CSS(`#logout`)), chromedp.WaitVisible(chromedp.CSS("#login")))
	do("the topic page after logout: the login form", chromedp.Navigate(ui+"/topics/audited"), chromedp.WaitVisible(chromedp.CSS("#login")))

	consoleMu.Lock()
	defer consoleMu.Unlock()
	if len(consoleErrors) > 0 {
		t.Errorf("console errors in the pages:\n%s", strings.Join(consoleErrors, "\n"))
	}
}
