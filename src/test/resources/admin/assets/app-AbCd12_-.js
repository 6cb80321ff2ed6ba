document.getElementById("app").textContent = "CONSOLE-TEST-SCRIPT";
